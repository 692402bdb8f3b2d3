#pragma once
// Shared pieces of the gradient rules.
#include <algorithm>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "engine/autograd/gradient_builder.h"

namespace dprun::grad {

/// Binary ops before opset 7 broadcast B onto A from `axis` when broadcast=1; numpy-style
/// unbroadcasting only matches the suffix-aligned form (no axis).
inline void check_legacy_broadcast(GradientContext& ctx) {
  if (ctx.opset() < 7 && ctx.node().attr_int("broadcast", 0) != 0 && ctx.node().has_attr("axis"))
    ctx.fail("legacy broadcasting with an explicit axis is not supported");
}

/// Attributes for an emitted node that combines a value with another broadcast onto it, that
/// one second: broadcast=1 before opset 7 when `legacy` (the ops then broadcast only so),
/// none from opset 7 (numpy broadcasting).
inline std::map<std::string, Attribute> legacy_broadcast(const GradientContext& ctx,
                                                         bool legacy = true) {
  if (ctx.onnx_opset() >= 7 || !legacy) return {};
  return {{"broadcast", Attribute::of_int(1)}};
}

/// legacy_broadcast when the node itself broadcasts with broadcast=1 (before opset 7): for
/// emitted nodes that combine a value shaped like Y with the node's B, B second.
inline std::map<std::string, Attribute> node_legacy_broadcast(const GradientContext& ctx) {
  return legacy_broadcast(ctx, ctx.node().attr_int("broadcast", 0) != 0);
}

/// 1 - v for v of `dt`. Before opset 7 a 0-d A does not broadcast: -(v - 1) (the same value),
/// the one as B with broadcast=1.
inline std::string one_minus(GradientContext& ctx, const std::string& v, DType dt) {
  std::string one = ctx.scalar(1, dt);
  if (ctx.onnx_opset() >= 7) return ctx.emit("Sub", {one, v});
  return ctx.emit("Neg", {ctx.emit("Sub", {v, one}, legacy_broadcast(ctx))});
}

/// The reduction axes of a Reduce* node (attribute before opset 13/18, input after) when they
/// are known at build time; sets `all` when every axis is reduced.
struct ReduceAxes {
  std::vector<int64_t> axes;
  bool all = false;       // no axes given: every axis (unless noop)
  bool identity = false;  // noop_with_empty_axes with no axes: the node copies its input
  bool dynamic = false;   // axes come from a non-constant input
};

inline ReduceAxes reduce_axes(GradientContext& ctx) {
  const Node& node = ctx.node();
  ReduceAxes r;
  bool axes_as_input = ctx.input_count() > 1 && !ctx.I(1).empty();
  if (axes_as_input) {
    auto c = ctx.constant_value(ctx.I(1));
    if (!c) {
      r.dynamic = true;
      return r;
    }
    for (int64_t i = 0; i < c->numel(); ++i)
      r.axes.push_back(static_cast<int64_t>(c->item_as_double(i)));
  } else {
    r.axes = node.attr_ints("axes", {});
  }
  if (r.axes.empty()) {
    if (node.attr_int("noop_with_empty_axes", 0) != 0)
      r.identity = true;
    else
      r.all = true;
  }
  return r;
}

/// Broadcasts the gradient of a Reduce* output back over the input's shape (the shared part
/// of the Reduce* rules); `value` (default GO(0)) may be another value shaped like the output,
/// such as the output itself.
inline std::string expand_reduced_grad(GradientContext& ctx, const ReduceAxes& r,
                                       std::string value = {}) {
  const std::string& x = ctx.I(0);
  std::string g = value.empty() ? ctx.GO(0) : value;
  if (r.identity) return ctx.emit("Identity", {g});
  bool keepdims = ctx.node().attr_int("keepdims", 1) != 0;
  std::string x_dims = ctx.emit("Shape", {x});
  if (!keepdims && !r.all) {
    if (r.dynamic) {
      // The keepdims shape: x's shape with 1 at every reduced axis (negative axes allowed).
      Tensor one = Tensor::from_vector<int64_t>({1}, {1});
      std::string ones = ctx.emit("ConstantOfShape", {ctx.emit("Shape", {ctx.I(1)})},
                                  {{"value", Attribute::of_tensor(one)}});
      std::string kept =
          ctx.emit("ScatterElements", {x_dims, ctx.I(1), ones}, {{"axis", Attribute::of_int(0)}});
      g = ctx.emit("Reshape", {g, kept});
    } else {
      int64_t rank = ctx.require_rank(x);
      std::vector<int64_t> axes;
      for (int64_t a : r.axes) axes.push_back(normalize_axis(a, rank));
      std::sort(axes.begin(), axes.end());
      g = ctx.unsqueeze(g, axes);
    }
  }
  // With every axis reduced and keepdims=0, g is a scalar and broadcasts as it is.
  return ctx.emit("Expand", {g, x_dims});
}

/// A Reduce* node over static axes (every axis when empty) in the form of the emitted opset:
/// axes as an attribute before opset 13 (ReduceSum) or 18 (the other reductions), as an input
/// from then on.
inline std::string reduce(GradientContext& ctx, const std::string& op, const std::string& x,
                          const std::vector<int64_t>& axes, bool keepdims) {
  std::map<std::string, Attribute> attrs{{"keepdims", Attribute::of_int(keepdims ? 1 : 0)}};
  if (axes.empty()) return ctx.emit(op, {x}, attrs);
  if (ctx.onnx_opset() < (op == "ReduceSum" ? 13 : 18)) {
    attrs["axes"] = Attribute::of_ints(axes);
    return ctx.emit(op, {x}, attrs);
  }
  return ctx.emit(op, {x, ctx.ints(axes)}, attrs);
}

/// Zeros of `dtype` with the runtime shape `dims` (a 1-D int64 value; ConstantOfShape, opset 9).
inline std::string zeros_of_shape(GradientContext& ctx, const std::string& dims, DType dtype) {
  if (ctx.onnx_opset() < 9) ctx.fail("building zeros needs ai.onnx opset >= 9");
  Tensor zero = scalar_tensor(0.0, dtype).reshape({1});
  return ctx.emit("ConstantOfShape", {dims}, {{"value", Attribute::of_tensor(zero)}});
}

/// Zeros shaped like `like`, of `like`'s element type.
inline std::string zeros_like(GradientContext& ctx, const std::string& like) {
  return zeros_of_shape(ctx, ctx.emit("Shape", {like}), ctx.dtype_of(like));
}

/// Softmax-family helpers: before opset 13 the op works on the input coerced to 2-D at
/// `axis`; from 13 on a single axis. Returns {axis to reduce over, whether inputs were
/// flattened}.
struct SoftmaxAxis {
  int64_t axis;
  bool flattened;
};

inline SoftmaxAxis softmax_axis(GradientContext& ctx) {
  if (ctx.opset() < 13) return {ctx.node().attr_int("axis", 1), true};
  return {ctx.node().attr_int("axis", -1), false};
}

/// The sizes of `v`'s axes from `first` on, when every one of them is known at build time (a
/// constant, or a declared shape); nullopt otherwise.
inline std::optional<std::vector<int64_t>> static_dims(GradientContext& ctx, const std::string& v,
                                                       size_t first = 0) {
  SymbolicShape shape;
  if (auto c = ctx.constant_value(v)) {
    for (int64_t d : c->shape()) shape.push_back(Dim::known(d));
  } else if (auto t = ctx.type_of(v); t && t->shape) {
    shape = *t->shape;
  } else {
    return std::nullopt;
  }
  if (first > shape.size()) return std::nullopt;
  std::vector<int64_t> dims;
  for (size_t i = first; i < shape.size(); ++i) {
    if (!shape[i].is_known()) return std::nullopt;
    dims.push_back(shape[i].value);
  }
  return dims;
}

/// The sum of every element of `x` as a 0-d value (ReduceSum without axes, at any opset).
inline std::string sum_all(GradientContext& ctx, const std::string& x) {
  return ctx.emit("ReduceSum", {x}, {{"keepdims", Attribute::of_int(0)}});
}

}  // namespace dprun::grad
