// ReduceProd: dX_j = dY * (the product of the other elements of X_j's group). Dividing Y by
// X_j is wrong where X holds zeros, so the rule counts the zeros Z of each group and takes the
// product P of its nonzero elements:
//   Z = 0: dX_j = dY * P / X_j
//   Z = 1: dX_j = dY * P at the zero, 0 elsewhere (every other product holds the zero)
//   Z > 1: dX_j = 0
// Zeros are found as "neither below nor above 0", so no float Equal is needed.
#include "ops/grad/grad_util.h"

namespace dprun {
namespace {

// `v` (shaped like X) reduced with `op` over the node's axes, keeping the reduced axes so the
// result broadcasts over X.
std::string reduce_kept(GradientContext& ctx, const grad::ReduceAxes& axes, const char* op,
                        const std::string& v) {
  if (axes.dynamic) return ctx.emit(op, {v, ctx.I(1)}, {{"keepdims", Attribute::of_int(1)}});
  return grad::reduce(ctx, op, v, axes.all ? std::vector<int64_t>{} : axes.axes, true);
}

void reduce_prod_grad(GradientContext& ctx) {
  grad::ReduceAxes axes = grad::reduce_axes(ctx);
  std::string g = grad::expand_reduced_grad(ctx, axes);
  if (axes.identity) {
    ctx.set_GI(0, g);
    return;
  }
  if (ctx.onnx_opset() < 9) ctx.fail("needs ai.onnx opset >= 9 (Where)");
  const std::string& x = ctx.I(0);
  DType dtype = ctx.dtype_of(x);
  std::string zero = ctx.scalar(0, dtype);
  std::string is_zero = ctx.emit(
      "Not", {ctx.emit("Or", {ctx.emit("Less", {x, zero}), ctx.emit("Greater", {x, zero})})});
  std::string safe = ctx.emit("Where", {is_zero, ctx.scalar(1, dtype), x});
  std::string product = reduce_kept(ctx, axes, "ReduceProd", safe);
  std::string zeros = reduce_kept(ctx, axes, "ReduceSum", ctx.cast(is_zero, dtype));
  std::string none = ctx.emit("Less", {zeros, ctx.scalar(0.5, dtype)});
  std::string at_most_one = ctx.emit("Less", {zeros, ctx.scalar(1.5, dtype)});
  std::string at_zero = ctx.emit("Where", {at_most_one, product, zero});
  std::string elsewhere = ctx.emit("Where", {none, ctx.emit("Div", {product, safe}), zero});
  std::string others = ctx.emit("Where", {is_zero, at_zero, elsewhere});
  ctx.set_GI(0, ctx.emit("Mul", {g, others}));
}

DPRUN_REGISTER_GRADIENT({.op_type = "ReduceProd", .since = 1, .rule = reduce_prod_grad});

}  // namespace
}  // namespace dprun
