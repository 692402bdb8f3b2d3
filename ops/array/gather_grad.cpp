// Gather: dX is zeros shaped like X with each slice of dY added at the position its index
// names along `axis`; repeated indices (an embedding lookup of a repeated token) accumulate.
// dY is viewed as [outer, Q, inner] with Q the number of indices. From opset 16 one
// ScatterElements with reduction "add" accumulates. Before, Unique groups equal indices, a
// one-hot MatMul sums each group's slices (Q x distinct indices, not Q x X.shape[axis]), and
// ScatterElements writes the now distinct slices.
#include <limits>

#include "ops/grad/grad_util.h"

namespace dprun {
namespace {

struct GatherView {
  std::string x_dims;  // Shape(X)
  std::string size;    // [X.shape[axis]]
  std::string dy3;     // dY as [outer, Q, inner]
  std::string zeros3;  // zeros [outer, X.shape[axis], inner]
};

GatherView gather_view(GradientContext& ctx, int64_t axis) {
  GatherView v;
  v.x_dims = ctx.emit("Shape", {ctx.I(0)});
  v.size = ctx.emit("Gather", {v.x_dims, ctx.ints({axis})});
  std::string before = ctx.emit("Slice", {v.x_dims, ctx.ints({0}), ctx.ints({axis})});
  std::string outer = grad::reduce(ctx, "ReduceProd", before, {}, true);
  std::string inner = ctx.ints({1});
  if (axis != -1) {
    std::string after = ctx.emit(
        "Slice", {v.x_dims, ctx.ints({axis + 1}), ctx.ints({std::numeric_limits<int64_t>::max()})});
    inner = grad::reduce(ctx, "ReduceProd", after, {}, true);
  }
  Attribute axis0 = Attribute::of_int(0);
  v.dy3 =
      ctx.emit("Reshape",
               {ctx.GO(0), ctx.emit("Concat", {outer, ctx.ints({-1}), inner}, {{"axis", axis0}})});
  std::string dims3 = ctx.emit("Concat", {outer, v.size, inner}, {{"axis", axis0}});
  v.zeros3 = grad::zeros_of_shape(ctx, dims3, ctx.dtype_of(ctx.I(0)));
  return v;
}

// Opset 16+: every slice of dY added at its index in one pass.
std::string scatter_add(GradientContext& ctx, const GatherView& v) {
  std::string idx = ctx.emit("Reshape", {ctx.I(1), ctx.ints({-1, 1})});
  std::string idx3 = ctx.emit("Expand", {idx, ctx.emit("Shape", {v.dy3})});
  return ctx.emit("ScatterElements", {v.zeros3, idx3, v.dy3},
                  {{"axis", Attribute::of_int(1)}, {"reduction", Attribute::of_string("add")}});
}

// Opsets 11-15: group equal indices (negative ones normalised first so -1 and size-1 group
// together), sum each group with a one-hot MatMul, then scatter the distinct groups.
std::string grouped_scatter(GradientContext& ctx, const GatherView& v) {
  std::string idx = ctx.emit("Reshape", {ctx.I(1), ctx.ints({-1})});
  if (ctx.dtype_of(ctx.I(1)) != DType::Int64) idx = ctx.cast(idx, DType::Int64);
  std::string negative = ctx.emit("Less", {idx, ctx.scalar(0, DType::Int64)});
  idx = ctx.emit("Where", {negative, ctx.emit("Add", {idx, v.size}), idx});
  std::vector<std::string> u = ctx.emit_n("Unique", {idx}, 4);  // values, first, inverse, counts
  std::string groups = ctx.emit("Range", {ctx.scalar(0, DType::Int64), ctx.emit("Size", {u[0]}),
                                          ctx.scalar(1, DType::Int64)});
  std::string member = ctx.emit("Equal", {ctx.unsqueeze(u[2], {1}), groups});  // [Q, groups]
  std::string onehot_t = ctx.emit("Transpose", {ctx.cast(member, ctx.dtype_of(ctx.I(0)))},
                                  {{"perm", Attribute::of_ints({1, 0})}});
  std::string sums = ctx.emit("MatMul", {onehot_t, v.dy3});  // [outer, groups, inner]
  std::string idx3 = ctx.emit("Expand", {ctx.unsqueeze(u[0], {1}), ctx.emit("Shape", {sums})});
  return ctx.emit("ScatterElements", {v.zeros3, idx3, sums}, {{"axis", Attribute::of_int(1)}});
}

void gather_grad(GradientContext& ctx) {
  if (ctx.onnx_opset() < 11) ctx.fail("needs ai.onnx opset >= 11 (ScatterElements, Unique)");
  GatherView v = gather_view(ctx, ctx.node().attr_int("axis", 0));
  std::string dx3 = ctx.onnx_opset() >= 16 ? scatter_add(ctx, v) : grouped_scatter(ctx, v);
  ctx.set_GI(0, ctx.emit("Reshape", {dx3, v.x_dims}));
}

DPRUN_REGISTER_GRADIENT({.op_type = "Gather", .since = 1, .rule = gather_grad});

}  // namespace
}  // namespace dprun
