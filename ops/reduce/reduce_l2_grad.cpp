// ReduceL2: Y = sqrt(sum X^2), dX = dY * X / Y, taken as 0 where Y is 0 (as PyTorch's norm).
#include "ops/grad/grad_util.h"

namespace dprun {
namespace {

void reduce_l2_grad(GradientContext& ctx) {
  grad::ReduceAxes axes = grad::reduce_axes(ctx);
  const std::string& x = ctx.I(0);
  std::string g = grad::expand_reduced_grad(ctx, axes);
  if (axes.identity) {  // the node copies X: dX = dY
    ctx.set_GI(0, g);
    return;
  }
  std::string y = grad::expand_reduced_grad(ctx, axes, ctx.O(0));
  std::string zero = ctx.scalar(0, ctx.dtype_of(x));
  std::string ratio =
      ctx.emit("Where", {ctx.emit("Greater", {y, zero}), ctx.emit("Div", {x, y}), zero});
  ctx.set_GI(0, ctx.emit("Mul", {g, ratio}));
}

DPRUN_REGISTER_GRADIENT({.op_type = "ReduceL2", .since = 1, .rule = reduce_l2_grad});

}  // namespace
}  // namespace dprun
