// Conv: dX = ConvTranspose(dY, W) cut to X's spatial size; dW = Conv of X and dY with the batch
// and channel axes swapped (strides and dilations exchange roles), cropped to the kernel size;
// dB = dY summed over all axes but the channels.
//
// No static batch size is needed: the batch is a channel axis of the dW Conv and the batch of
// the ConvTranspose, both read at run time. With X's spatial sizes known at build time, the
// ConvTranspose's output_padding gives X's size exactly. Without them (opset 10 on), it pads
// the end by stride - 1 instead (always enough: a stride leaves fewer than stride input rows
// unused) and a Slice to Shape(X)[2:] cuts the result to X's size. The kernel size for dW comes
// from W's shape, kernel_shape or, from opset 10, Shape(W) at run time. dW needs group = 1.
#include <climits>

#include "ops/grad/grad_util.h"

namespace dprun {
namespace {

// Shape(v)[2:], the run-time spatial sizes of an [N, C, D1, ...] value (opset 10 Slice).
std::string spatial_dims(GradientContext& ctx, const std::string& v) {
  return ctx.emit("Slice",
                  {ctx.emit("Shape", {v}), ctx.ints({2}), ctx.ints({INT64_MAX}), ctx.ints({0})});
}

// The kernel's spatial sizes when known at build time.
std::optional<std::vector<int64_t>> static_kernel(GradientContext& ctx) {
  if (auto k = grad::static_dims(ctx, ctx.I(1), 2)) return k;
  if (ctx.node().has_attr("kernel_shape")) return ctx.node().attr_ints("kernel_shape");
  return std::nullopt;
}

// Slice of `v` on the spatial axes 2.. from 0 to `ends` (a static list or a 1-D int64 value).
std::string crop_spatial(GradientContext& ctx, const std::string& v, size_t spatial,
                         const std::vector<int64_t>* static_ends, const std::string& ends) {
  std::vector<int64_t> axes, starts(spatial, 0);
  for (size_t i = 0; i < spatial; ++i) axes.push_back(static_cast<int64_t>(i + 2));
  if (ctx.onnx_opset() >= 10)
    return ctx.emit("Slice", {v, ctx.ints(starts), static_ends ? ctx.ints(*static_ends) : ends,
                              ctx.ints(axes)});
  return ctx.emit("Slice", {v},
                  {{"starts", Attribute::of_ints(starts)},
                   {"ends", Attribute::of_ints(*static_ends)},
                   {"axes", Attribute::of_ints(axes)}});
}

void conv_grad(GradientContext& ctx) {
  const Node& node = ctx.node();
  std::string auto_pad = node.attr_string("auto_pad", "NOTSET");
  if (auto_pad != "NOTSET" && auto_pad != "VALID")
    ctx.fail("auto_pad ", auto_pad, " is not supported");
  auto kernel = static_kernel(ctx);
  size_t spatial = kernel ? kernel->size() : static_cast<size_t>(ctx.require_rank(ctx.I(1)) - 2);
  auto x_spatial = grad::static_dims(ctx, ctx.I(0), 2);
  if (x_spatial && x_spatial->size() != spatial)
    ctx.fail("X has ", x_spatial->size(), " spatial axes and W ", spatial);
  bool dynamic = !x_spatial || !kernel;
  if (dynamic && ctx.onnx_opset() < 10)
    ctx.fail("at ai.onnx opset ", ctx.onnx_opset(),
             " the gradient needs static spatial sizes of X and W (run-time sizes need opset "
             ">= 10)");
  int64_t group = node.attr_int("group", 1);
  std::vector<int64_t> strides = node.attr_ints("strides", std::vector<int64_t>(spatial, 1));
  std::vector<int64_t> dilations = node.attr_ints("dilations", std::vector<int64_t>(spatial, 1));
  std::vector<int64_t> pads = node.attr_ints("pads", std::vector<int64_t>(2 * spatial, 0));
  if (auto_pad == "VALID") pads.assign(2 * spatial, 0);
  if (strides.size() != spatial || dilations.size() != spatial || pads.size() != 2 * spatial)
    ctx.fail("strides, dilations and pads must match the ", spatial, " spatial axes");
  const std::string& go = ctx.GO(0);

  if (ctx.wants_GI(0)) {
    std::map<std::string, Attribute> attrs = {{"strides", Attribute::of_ints(strides)},
                                              {"dilations", Attribute::of_ints(dilations)},
                                              {"group", Attribute::of_int(group)}};
    std::vector<int64_t> output_padding(spatial);
    if (!dynamic) {
      // X + pads - extent = (out - 1) * stride + unused, with unused < stride rows the
      // windows never reach: output_padding gives them back.
      for (size_t i = 0; i < spatial; ++i) {
        int64_t extent = ((*kernel)[i] - 1) * dilations[i] + 1;
        output_padding[i] = ((*x_spatial)[i] + pads[i] + pads[i + spatial] - extent) % strides[i];
      }
      attrs["pads"] = Attribute::of_ints(pads);
      attrs["output_padding"] = Attribute::of_ints(output_padding);
      ctx.set_GI(0, ctx.emit("ConvTranspose", {go, ctx.I(1)}, attrs));
    } else {
      // Crop only the leading pads; the end is cut by the Slice below.
      std::vector<int64_t> begin_pads(2 * spatial, 0);
      for (size_t i = 0; i < spatial; ++i) {
        begin_pads[i] = pads[i];
        output_padding[i] = strides[i] - 1;
      }
      attrs["pads"] = Attribute::of_ints(begin_pads);
      attrs["output_padding"] = Attribute::of_ints(output_padding);
      std::string full = ctx.emit("ConvTranspose", {go, ctx.I(1)}, attrs);
      ctx.set_GI(0, crop_spatial(ctx, full, spatial, nullptr, spatial_dims(ctx, ctx.I(0))));
    }
  }
  if (ctx.wants_GI(1)) {
    if (group != 1) ctx.fail("the weight gradient needs group = 1, got ", group);
    std::vector<int64_t> perm = {1, 0};
    for (size_t i = 0; i < spatial; ++i) perm.push_back(static_cast<int64_t>(i + 2));
    std::string xt = ctx.emit("Transpose", {ctx.I(0)}, {{"perm", Attribute::of_ints(perm)}});
    std::string gt = ctx.emit("Transpose", {go}, {{"perm", Attribute::of_ints(perm)}});
    std::string dw = ctx.emit("Conv", {xt, gt},
                              {{"strides", Attribute::of_ints(dilations)},
                               {"dilations", Attribute::of_ints(strides)},
                               {"pads", Attribute::of_ints(pads)}});
    // The correlation can extend past the kernel when the stride leaves input rows unused.
    dw = kernel ? crop_spatial(ctx, dw, spatial, &*kernel, {})
                : crop_spatial(ctx, dw, spatial, nullptr, spatial_dims(ctx, ctx.I(1)));
    ctx.set_GI(1, ctx.emit("Transpose", {dw}, {{"perm", Attribute::of_ints(perm)}}));
  }
  if (ctx.input_count() > 2 && ctx.wants_GI(2)) {
    std::vector<int64_t> axes = {0};
    for (size_t i = 0; i < spatial; ++i) axes.push_back(static_cast<int64_t>(i + 2));
    ctx.set_GI(2, ctx.reduce_sum(go, axes, false));
  }
}

DPRUN_REGISTER_GRADIENT({.op_type = "Conv", .since = 1, .rule = conv_grad});

}  // namespace
}  // namespace dprun
