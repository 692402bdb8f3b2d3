// GatherND: each index tuple of I picks a slice of X, so dX sums the slices of dY into the
// positions the tuples name (ScatterND with reduction "add" into zeros, opset 16: repeated
// tuples accumulate, negative indices count from the end).
//
// With batch_dims b > 0 the tuples index within each batch entry, which ScatterND cannot
// express: the b batch axes are merged into one of size B, each tuple gets its batch position
// prepended ([B, R, 1 + k] indices), the ScatterND runs on [B, X.shape[b:]...] and the result
// is reshaped to X's shape.
#include <limits>

#include "ops/grad/grad_util.h"

namespace dprun {
namespace {

constexpr int64_t kEnd = std::numeric_limits<int64_t>::max();

std::string scatter_add(GradientContext& ctx, const std::string& zeros, const std::string& idx,
                        const std::string& updates) {
  return ctx.emit("ScatterND", {zeros, idx, updates}, {{"reduction", Attribute::of_string("add")}});
}

std::string batched_scatter_add(GradientContext& ctx, int64_t b) {
  Attribute axis0 = Attribute::of_int(0);
  std::string x_dims = ctx.emit("Shape", {ctx.I(0)});
  std::string batch = grad::reduce(
      ctx, "ReduceProd", ctx.emit("Slice", {x_dims, ctx.ints({0}), ctx.ints({b})}), {}, true);
  std::string k =
      ctx.emit("Slice", {ctx.emit("Shape", {ctx.I(1)}), ctx.ints({-1}), ctx.ints({kEnd})});
  std::string idx = ctx.cast(ctx.I(1), DType::Int64);
  idx =
      ctx.emit("Reshape", {idx, ctx.emit("Concat", {batch, ctx.ints({-1}), k}, {{"axis", axis0}})});
  std::string tuples = ctx.emit("Gather", {ctx.emit("Shape", {idx}), ctx.ints({1})});  // [R]
  // Each tuple's batch position, [B, R, 1].
  std::string positions = ctx.emit(
      "Range",
      {ctx.scalar(0, DType::Int64), ctx.emit("Squeeze", {batch}), ctx.scalar(1, DType::Int64)});
  positions =
      ctx.emit("Expand", {ctx.emit("Reshape", {positions, ctx.ints({-1, 1, 1})}),
                          ctx.emit("Concat", {batch, tuples, ctx.ints({1})}, {{"axis", axis0}})});
  idx = ctx.emit("Concat", {positions, idx}, {{"axis", Attribute::of_int(-1)}});
  // dY as [B, R, X.shape[b + k:]...].
  std::string tail =
      ctx.emit("Slice", {x_dims, ctx.emit("Add", {k, ctx.ints({b})}), ctx.ints({kEnd})});
  std::string dy = ctx.emit(
      "Reshape", {ctx.GO(0), ctx.emit("Concat", {batch, tuples, tail}, {{"axis", axis0}})});
  std::string rest = ctx.emit("Slice", {x_dims, ctx.ints({b}), ctx.ints({kEnd})});
  std::string zeros = grad::zeros_of_shape(
      ctx, ctx.emit("Concat", {batch, rest}, {{"axis", axis0}}), ctx.dtype_of(ctx.I(0)));
  return ctx.emit("Reshape", {scatter_add(ctx, zeros, idx, dy), x_dims});
}

void gather_nd_grad(GradientContext& ctx) {
  if (ctx.onnx_opset() < 16)
    ctx.fail(
        "needs ai.onnx opset >= 16 (ScatterND with reduction add, to sum repeated "
        "indices); the graph is at opset ",
        ctx.onnx_opset());
  int64_t b = ctx.node().attr_int("batch_dims", 0);
  if (b == 0) {
    ctx.set_GI(0, scatter_add(ctx, grad::zeros_like(ctx, ctx.I(0)), ctx.I(1), ctx.GO(0)));
    return;
  }
  ctx.set_GI(0, batched_scatter_add(ctx, b));
}

DPRUN_REGISTER_GRADIENT({.op_type = "GatherND", .since = 11, .rule = gather_nd_grad});

}  // namespace
}  // namespace dprun
