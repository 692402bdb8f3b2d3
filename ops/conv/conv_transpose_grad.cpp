// ConvTranspose: the adjoint of a Conv with the same window, so with pads (pb, pe) and
// Y[n, g*Mo + m, i*s + k*d - pb] += X[n, g*Ci + c, i] * W[g*Ci + c, m, k] (W [G*Ci, Mo, k...]):
//   dX = Conv(dY, W, strides s, dilations d, pads (pb, pe'), group G), X's size;
//   dW = the convolution weight gradient with X and dY exchanged (ops/conv/conv_grad_util.h):
//        dY plays the convolution's input and X its output gradient, giving [G*Ci, Mo, k...];
//   dB = dY summed over every axis but 1.
// pe' is the end pad that makes the Conv's output X's size: rows output_padding or a larger
// output_shape add at the end hold no term of X, and the Conv reads rows past dY as zeros. It
// is max(0, pe - output_padding) (output_shape: pads as the forward op derives them); where a
// row count that large remains (output_padding >= stride, allowed below the dilation, or an
// output_shape past the full size) a Slice cuts the Conv to X's size.
//
// Pads and output_padding come from the attributes; only output_shape needs X's spatial sizes
// and the kernel's at build time. auto_pad SAME_UPPER/SAME_LOWER are refused.
#include <algorithm>

#include "ops/conv/conv_grad_util.h"

namespace dprun {
namespace {

// The forward op's pads when output_shape is given (ops/common/conv_util.h resolve_transpose): the
// total the full output exceeds it by, the larger half at the begin; a larger output is
// zero-extended at the end.
void pads_from_output_shape(GradientContext& ctx, grad::ConvWindow& w,
                            const std::vector<int64_t>& adj) {
  const size_t nd = w.spatial;
  std::vector<int64_t> out = ctx.node().attr_ints("output_shape");
  if (out.size() == nd + 2) out.erase(out.begin(), out.begin() + 2);
  if (out.size() != nd) ctx.fail("output_shape must have ", nd, " values");
  auto in = grad::static_dims(ctx, ctx.I(0), 2);
  auto kernel = grad::static_kernel(ctx);
  if (!in || !kernel || in->size() != nd || kernel->size() != nd)
    ctx.fail(
        "with output_shape the gradient needs X's spatial sizes and the kernel's at build "
        "time");
  for (size_t i = 0; i < nd; ++i) {
    const int64_t extent = ((*kernel)[i] - 1) * w.dilations[i] + 1;
    const int64_t full = w.strides[i] * ((*in)[i] - 1) + adj[i] + extent;
    const int64_t total = std::max<int64_t>(0, full - out[i]);
    w.pads[i] = total - total / 2;
    // Negative: the end pad of a zero-extended output, rows no term of X reaches.
    w.pads[i + nd] = total > 0 ? total / 2 : full - out[i];
  }
}

// Turns the forward end pads into the Conv's pe' (file comment); true when a crop to X's size
// is still needed.
bool conv_end_pads(grad::ConvWindow& w, const std::vector<int64_t>& adj) {
  bool crop = false;
  for (size_t i = 0; i < w.spatial; ++i) {
    const int64_t low = w.pads[i + w.spatial] - adj[i];  // the least end pad giving X's size
    w.pads[i + w.spatial] = std::max<int64_t>(0, low);
    if (w.pads[i + w.spatial] > low + w.strides[i] - 1) crop = true;
  }
  return crop;
}

void conv_transpose_grad(GradientContext& ctx) {
  const Node& node = ctx.node();
  auto kernel = grad::static_kernel(ctx);
  const size_t spatial =
      kernel ? kernel->size() : static_cast<size_t>(ctx.require_rank(ctx.I(1)) - 2);
  grad::ConvWindow w = grad::conv_window(ctx, spatial);
  std::vector<int64_t> adj = node.attr_ints("output_padding", std::vector<int64_t>(spatial, 0));
  if (adj.size() != spatial) ctx.fail("output_padding must have ", spatial, " values");
  if (node.has_attr("output_shape")) pads_from_output_shape(ctx, w, adj);
  const bool crop = conv_end_pads(w, adj);
  const std::string& go = ctx.GO(0);

  if (ctx.wants_GI(0)) {
    std::string dx = ctx.emit("Conv", {go, ctx.I(1)},
                              {{"strides", Attribute::of_ints(w.strides)},
                               {"dilations", Attribute::of_ints(w.dilations)},
                               {"pads", Attribute::of_ints(w.pads)},
                               {"group", Attribute::of_int(w.group)}});
    if (crop) dx = grad::crop_like(ctx, dx, spatial, grad::static_dims(ctx, ctx.I(0), 2), ctx.I(0));
    ctx.set_GI(0, dx);
  }
  if (ctx.wants_GI(1)) {
    if (!kernel && ctx.onnx_opset() < 10)
      ctx.fail("at ai.onnx opset ", ctx.onnx_opset(),
               " the weight gradient needs the kernel's sizes at build time (run-time sizes need "
               "opset >= 10)");
    // dY [N, G*Mo, ...] is the convolution's input: Mo is W's dim 1.
    ctx.set_GI(1, grad::conv_weight_gradient(ctx, go, ctx.I(0), w, kernel, ctx.I(1),
                                             grad::static_dim(ctx, ctx.I(1), 1)));
  }
  grad::set_bias_gradient(ctx, spatial);
}

DPRUN_REGISTER_GRADIENT({.op_type = "ConvTranspose", .since = 1, .rule = conv_transpose_grad});

}  // namespace
}  // namespace dprun
