// Conv: dX = ConvTranspose(dY, W) cut to X's spatial size; dW = Conv of X and dY with the batch
// and channel axes swapped (strides and dilations exchange roles), cropped to the kernel size,
// for any group (ops/conv/conv_grad_util.h); dB = dY summed over all axes but the channels.
//
// No static batch size is needed: the batch is a channel axis of the dW Conv and the batch of
// the ConvTranspose, both read at run time. With X's spatial sizes known at build time, the
// ConvTranspose's output_padding gives X's size exactly. Without them (opset 10 on), it pads
// the end by stride - 1 instead (always enough: a stride leaves fewer than stride input rows
// unused) and a Slice to Shape(X)[2:] cuts the result to X's size. The kernel size for dW comes
// from W's shape, kernel_shape or, from opset 10, Shape(W) at run time.
#include "ops/conv/conv_grad_util.h"

namespace dprun {
namespace {

// dX: the ConvTranspose of dY with W on the forward geometry, exactly X's size.
std::string input_gradient(GradientContext& ctx, const grad::ConvWindow& w,
                           const std::vector<int64_t>& kernel_or_empty,
                           const std::optional<std::vector<int64_t>>& x_spatial) {
  const size_t spatial = w.spatial;
  std::map<std::string, Attribute> attrs = {{"strides", Attribute::of_ints(w.strides)},
                                            {"dilations", Attribute::of_ints(w.dilations)},
                                            {"group", Attribute::of_int(w.group)}};
  std::vector<int64_t> output_padding(spatial);
  if (x_spatial && !kernel_or_empty.empty()) {
    // X + pads - extent = (out - 1) * stride + unused, with unused < stride rows the
    // windows never reach: output_padding gives them back.
    for (size_t i = 0; i < spatial; ++i) {
      int64_t extent = (kernel_or_empty[i] - 1) * w.dilations[i] + 1;
      output_padding[i] =
          ((*x_spatial)[i] + w.pads[i] + w.pads[i + spatial] - extent) % w.strides[i];
    }
    attrs["pads"] = Attribute::of_ints(w.pads);
    attrs["output_padding"] = Attribute::of_ints(output_padding);
    return ctx.emit("ConvTranspose", {ctx.GO(0), ctx.I(1)}, attrs);
  }
  // Crop only the leading pads; the end is cut by the Slice below.
  std::vector<int64_t> begin_pads(2 * spatial, 0);
  for (size_t i = 0; i < spatial; ++i) {
    begin_pads[i] = w.pads[i];
    output_padding[i] = w.strides[i] - 1;
  }
  attrs["pads"] = Attribute::of_ints(begin_pads);
  attrs["output_padding"] = Attribute::of_ints(output_padding);
  std::string full = ctx.emit("ConvTranspose", {ctx.GO(0), ctx.I(1)}, attrs);
  return grad::crop_like(ctx, full, spatial, std::nullopt, ctx.I(0));
}

void conv_grad(GradientContext& ctx) {
  auto kernel = grad::static_kernel(ctx);
  size_t spatial = kernel ? kernel->size() : static_cast<size_t>(ctx.require_rank(ctx.I(1)) - 2);
  const grad::ConvWindow w = grad::conv_window(ctx, spatial);
  auto x_spatial = grad::static_dims(ctx, ctx.I(0), 2);
  if (x_spatial && x_spatial->size() != spatial)
    ctx.fail("X has ", x_spatial->size(), " spatial axes and W ", spatial);
  bool dynamic = !x_spatial || !kernel;
  if (dynamic && ctx.onnx_opset() < 10)
    ctx.fail("at ai.onnx opset ", ctx.onnx_opset(),
             " the gradient needs static spatial sizes of X and W (run-time sizes need opset "
             ">= 10)");
  const std::string& go = ctx.GO(0);

  if (ctx.wants_GI(0))
    ctx.set_GI(0, input_gradient(ctx, w, kernel ? *kernel : std::vector<int64_t>{},
                                 dynamic ? std::nullopt : x_spatial));
  if (ctx.wants_GI(1))  // W [G*Co, Ci, k...]: Ci is W's dim 1
    ctx.set_GI(1, grad::conv_weight_gradient(ctx, ctx.I(0), go, w, kernel, ctx.I(1),
                                             grad::static_dim(ctx, ctx.I(1), 1)));
  grad::set_bias_gradient(ctx, spatial);
}

DPRUN_REGISTER_GRADIENT({.op_type = "Conv", .since = 1, .rule = conv_grad});

}  // namespace
}  // namespace dprun
