// Conv: dX = ConvTranspose(dY, W) with output_padding chosen so the result has X's spatial
// size; dW = Conv of X and dY with the batch and channel axes swapped (strides and dilations
// exchange roles), cropped to the kernel size; dB = dY summed over all axes but the channels.
// Needs static spatial sizes; dW is supported for group = 1.
#include "ops/grad/grad_util.h"

namespace dprun {
namespace {

std::optional<Shape> static_shape(GradientContext& ctx, const std::string& v) {
  if (auto c = ctx.constant_value(v)) return c->shape();
  auto t = ctx.type_of(v);
  if (!t || !t->shape) return std::nullopt;
  Shape s;
  for (const Dim& d : *t->shape) {
    if (!d.is_known()) return std::nullopt;
    s.push_back(d.value);
  }
  return s;
}

void conv_grad(GradientContext& ctx) {
  const Node& node = ctx.node();
  std::string auto_pad = node.attr_string("auto_pad", "NOTSET");
  if (auto_pad != "NOTSET" && auto_pad != "VALID")
    ctx.fail("auto_pad ", auto_pad, " is not supported");
  auto xs = static_shape(ctx, ctx.I(0));
  auto ws = static_shape(ctx, ctx.I(1));
  if (!xs || !ws) ctx.fail("needs static shapes of X and W");
  size_t spatial = xs->size() - 2;
  int64_t group = node.attr_int("group", 1);
  std::vector<int64_t> strides = node.attr_ints("strides", std::vector<int64_t>(spatial, 1));
  std::vector<int64_t> dilations = node.attr_ints("dilations", std::vector<int64_t>(spatial, 1));
  std::vector<int64_t> pads = node.attr_ints("pads", std::vector<int64_t>(2 * spatial, 0));
  if (auto_pad == "VALID") pads.assign(2 * spatial, 0);
  std::vector<int64_t> out_size(spatial), kernel(spatial);
  for (size_t i = 0; i < spatial; ++i) {
    kernel[i] = (*ws)[i + 2];
    int64_t extent = (kernel[i] - 1) * dilations[i] + 1;
    out_size[i] = ((*xs)[i + 2] + pads[i] + pads[i + spatial] - extent) / strides[i] + 1;
  }
  const std::string& go = ctx.GO(0);

  if (ctx.wants_GI(0)) {
    std::vector<int64_t> output_padding(spatial);
    for (size_t i = 0; i < spatial; ++i)
      output_padding[i] =
          (*xs)[i + 2] - ((out_size[i] - 1) * strides[i] + (kernel[i] - 1) * dilations[i] + 1 -
                          pads[i] - pads[i + spatial]);
    ctx.set_GI(0, ctx.emit("ConvTranspose", {go, ctx.I(1)},
                           {{"strides", grad_attr_ints(strides)},
                            {"dilations", grad_attr_ints(dilations)},
                            {"pads", grad_attr_ints(pads)},
                            {"group", grad_attr_int(group)},
                            {"output_padding", grad_attr_ints(output_padding)}}));
  }
  if (ctx.wants_GI(1)) {
    if (group != 1) ctx.fail("the weight gradient needs group = 1, got ", group);
    std::vector<int64_t> perm = {1, 0};
    for (size_t i = 0; i < spatial; ++i) perm.push_back(static_cast<int64_t>(i + 2));
    std::string xt = ctx.emit("Transpose", {ctx.I(0)}, {{"perm", grad_attr_ints(perm)}});
    std::string gt = ctx.emit("Transpose", {go}, {{"perm", grad_attr_ints(perm)}});
    std::string dw = ctx.emit("Conv", {xt, gt},
                              {{"strides", grad_attr_ints(dilations)},
                               {"dilations", grad_attr_ints(strides)},
                               {"pads", grad_attr_ints(pads)}});
    // The correlation can extend past the kernel when the stride leaves input rows unused.
    std::vector<int64_t> axes, starts(spatial, 0);
    for (size_t i = 0; i < spatial; ++i) axes.push_back(static_cast<int64_t>(i + 2));
    if (ctx.onnx_opset() >= 10)
      dw = ctx.emit("Slice", {dw, ctx.ints(starts), ctx.ints(kernel), ctx.ints(axes)});
    else
      dw = ctx.emit("Slice", {dw},
                    {{"starts", grad_attr_ints(starts)},
                     {"ends", grad_attr_ints(kernel)},
                     {"axes", grad_attr_ints(axes)}});
    ctx.set_GI(1, ctx.emit("Transpose", {dw}, {{"perm", grad_attr_ints(perm)}}));
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
