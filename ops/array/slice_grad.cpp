// Slice: dX is zeros shaped like X with dY written where the slice read.
//
// Before opset 10 the bounds are attributes and the step is 1, so dY is padded back to X's shape
// with pads computed at build time. From opset 10 (starts, ends, axes, steps as inputs) the same
// holds when the bounds are constants, the steps 1 and X's dims known along the sliced axes.
// Otherwise the same Slice is applied to an iota tensor shaped like X, which yields the flat
// positions it reads, whatever the steps' signs, the clamping or whether the bounds are known
// before the run; dY is scattered to them (a slice reads each position at most once).
#include <algorithm>
#include <optional>
#include <string>
#include <vector>

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

/// The bounds of a slice with step 1 along each axis it names.
struct UnitStepBounds {
  std::vector<int64_t> starts, ends, axes;  // axes: empty = 0, 1, ...
};

/// Pads that put dY back where a step-1 slice read, for X of rank `rank` whose dim along axis a
/// is dim_of(a) (nullopt when unknown: no pads then).
template <class DimOf>
std::optional<std::vector<int64_t>> pads_for(const UnitStepBounds& b, int64_t rank,
                                             const DimOf& dim_of) {
  std::vector<int64_t> axes = b.axes;
  if (axes.empty())
    for (size_t i = 0; i < b.starts.size(); ++i) axes.push_back(static_cast<int64_t>(i));
  std::vector<int64_t> pads(static_cast<size_t>(2 * rank), 0);
  for (size_t i = 0; i < axes.size() && i < b.starts.size() && i < b.ends.size(); ++i) {
    const int64_t a = normalize_axis(axes[i], rank);
    const std::optional<int64_t> dim = dim_of(a);
    if (!dim) return std::nullopt;
    auto clamp = [&](int64_t v) { return std::clamp<int64_t>(v < 0 ? v + *dim : v, 0, *dim); };
    const int64_t start = clamp(b.starts[i]), end = std::max(start, clamp(b.ends[i]));
    pads[static_cast<size_t>(a)] = start;
    pads[static_cast<size_t>(a + rank)] = *dim - end;
  }
  return pads;
}

// Attribute form (before opset 10): pads that put dY back where the slice read.
void slice_grad_by_padding(GradientContext& ctx) {
  const Node& node = ctx.node();
  const std::vector<int64_t> dims = static_shape(ctx, ctx.I(0));
  const UnitStepBounds bounds{node.attr_ints("starts"), node.attr_ints("ends"),
                              node.attr_ints("axes", {})};
  const auto pads = *pads_for(bounds, static_cast<int64_t>(dims.size()), [&](int64_t a) {
    return std::optional(dims[static_cast<size_t>(a)]);
  });
  const char* name = ctx.onnx_opset() < 2 ? "paddings" : "pads";
  ctx.set_GI(0, ctx.emit("Pad", {ctx.GO(0)}, {{name, Attribute::of_ints(pads)}}));
}

/// The values of a constant integer input, nullopt when it is not a constant.
std::optional<std::vector<int64_t>> constant_ints(GradientContext& ctx, size_t input) {
  if (input >= ctx.input_count() || ctx.I(input).empty()) return std::vector<int64_t>{};
  const std::optional<Tensor> t = ctx.constant_value(ctx.I(input));
  if (!t || (t->dtype() != DType::Int64 && t->dtype() != DType::Int32)) return std::nullopt;
  std::vector<int64_t> v;
  for (int64_t i = 0; i < t->numel(); ++i)
    v.push_back(t->dtype() == DType::Int64 ? t->data<int64_t>()[i] : t->data<int32_t>()[i]);
  return v;
}

/// Input form (opset 10 on) with constant bounds, steps of 1 and X's dims known along the sliced
/// axes (as exporters write q, k, v = qkv[..., :d], ...): pads known when the graph is built,
/// so dY is padded in one pass. Nullopt otherwise.
std::optional<std::vector<int64_t>> constant_unit_step_pads(GradientContext& ctx) {
  const auto starts = constant_ints(ctx, 1), ends = constant_ints(ctx, 2);
  const auto axes = constant_ints(ctx, 3), steps = constant_ints(ctx, 4);
  if (!starts || !ends || !axes || !steps || starts->size() != ends->size()) return std::nullopt;
  if (std::any_of(steps->begin(), steps->end(), [](int64_t s) { return s != 1; }))
    return std::nullopt;
  const auto type = ctx.type_of(ctx.I(0));
  if (!type || !type->shape) return std::nullopt;
  const SymbolicShape& shape = *type->shape;
  return pads_for({*starts, *ends, *axes}, static_cast<int64_t>(shape.size()),
                  [&](int64_t a) -> std::optional<int64_t> {
                    const Dim& d = shape[static_cast<size_t>(a)];
                    return d.is_known() ? std::optional(d.value) : std::nullopt;
                  });
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
  if (ctx.opset() < 10) {
    slice_grad_by_padding(ctx);
  } else if (auto pads = constant_unit_step_pads(ctx)) {
    // Pad takes its pads as an input from opset 11, as an attribute before.
    if (ctx.onnx_opset() >= 11)
      ctx.set_GI(0, ctx.emit("Pad", {ctx.GO(0), ctx.ints(*pads)}));
    else
      ctx.set_GI(0, ctx.emit("Pad", {ctx.GO(0)}, {{"pads", Attribute::of_ints(*pads)}}));
  } else {
    slice_grad_by_scatter(ctx);
  }
}

DPRUN_REGISTER_GRADIENT({.op_type = "Slice", .since = 1, .rule = slice_grad});

}  // namespace
}  // namespace dprun
