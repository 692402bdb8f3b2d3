// Slice: dX is zeros shaped like X with dY written where the slice read.
//
// From opset 10 (starts, ends, axes, steps as inputs) the same Slice is applied to an iota
// tensor shaped like X, which yields the flat positions it reads, whatever the steps' signs,
// the clamping or whether the bounds are known before the run; dY is scattered to them (a
// slice reads each position at most once). Before opset 10 the bounds are attributes and the
// step is 1, so dY is padded back to X's shape with pads computed at build time.
#include <algorithm>

#include "ops/grad/grad_util.h"

namespace dprun {
namespace {

std::vector<int64_t> static_shape(GradientContext& ctx, const std::string& x) {
  auto t = ctx.type_of(x);
  if (!t || !t->shape) ctx.fail("the shape of '", x, "' is unknown (run shape inference)");
  std::vector<int64_t> dims;
  for (const Dim& d : *t->shape) {
    if (!d.is_known()) ctx.fail("the shape of '", x, "' is not static");
    dims.push_back(d.value);
  }
  return dims;
}

// Attribute form: pads that put dY back where the slice read.
void slice_grad_by_padding(GradientContext& ctx) {
  const Node& node = ctx.node();
  std::vector<int64_t> dims = static_shape(ctx, ctx.I(0));
  int64_t rank = static_cast<int64_t>(dims.size());
  std::vector<int64_t> starts = node.attr_ints("starts"), ends = node.attr_ints("ends");
  std::vector<int64_t> axes = node.attr_ints("axes", {});
  if (axes.empty())
    for (size_t i = 0; i < starts.size(); ++i) axes.push_back(static_cast<int64_t>(i));
  std::vector<int64_t> pads(static_cast<size_t>(2 * rank), 0);
  for (size_t i = 0; i < axes.size() && i < starts.size() && i < ends.size(); ++i) {
    int64_t a = normalize_axis(axes[i], rank);
    int64_t dim = dims[static_cast<size_t>(a)];
    auto clamp = [&](int64_t v) { return std::clamp<int64_t>(v < 0 ? v + dim : v, 0, dim); };
    int64_t start = clamp(starts[i]), end = std::max(start, clamp(ends[i]));
    pads[static_cast<size_t>(a)] = start;
    pads[static_cast<size_t>(a + rank)] = dim - end;
  }
  const char* name = ctx.onnx_opset() < 2 ? "paddings" : "pads";
  ctx.set_GI(0, ctx.emit("Pad", {ctx.GO(0)}, {{name, Attribute::of_ints(pads)}}));
}

// 0, 1, ..., |X| - 1 shaped like X: Range from opset 11, a constant before.
std::string iota_like(GradientContext& ctx, const std::string& x) {
  if (ctx.onnx_opset() >= 11) {
    std::string range = ctx.emit(
        "Range", {ctx.scalar(0, DType::Int64), ctx.emit("Size", {x}), ctx.scalar(1, DType::Int64)});
    return ctx.emit("Reshape", {range, ctx.emit("Shape", {x})});
  }
  std::vector<int64_t> dims = static_shape(ctx, x);
  std::vector<int64_t> values(static_cast<size_t>(shape_numel(dims)));
  for (size_t i = 0; i < values.size(); ++i) values[i] = static_cast<int64_t>(i);
  return ctx.constant(Tensor::from_vector<int64_t>(dims, values));
}

void slice_grad_by_scatter(GradientContext& ctx) {
  const std::string& x = ctx.I(0);
  std::vector<std::string> inputs = ctx.node().inputs;
  inputs[0] = iota_like(ctx, x);
  std::string read = ctx.emit("Reshape", {ctx.emit("Slice", inputs), ctx.ints({-1})});
  std::string flat_zeros = grad::zeros_of_shape(
      ctx, ctx.emit("Reshape", {ctx.emit("Size", {x}), ctx.ints({1})}), ctx.dtype_of(x));
  std::string flat_dy = ctx.emit("Reshape", {ctx.GO(0), ctx.ints({-1})});
  // Scatter (opset 9-10) is ScatterElements under its older name.
  const char* scatter = ctx.onnx_opset() >= 11 ? "ScatterElements" : "Scatter";
  std::string flat =
      ctx.emit(scatter, {flat_zeros, read, flat_dy}, {{"axis", Attribute::of_int(0)}});
  ctx.set_GI(0, ctx.reshape_like(flat, x));
}

void slice_grad(GradientContext& ctx) {
  if (ctx.opset() < 10)
    slice_grad_by_padding(ctx);
  else
    slice_grad_by_scatter(ctx);
}

DPRUN_REGISTER_GRADIENT({.op_type = "Slice", .since = 1, .rule = slice_grad});

}  // namespace
}  // namespace dprun
