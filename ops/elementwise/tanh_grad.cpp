// Tanh: dX = dY * (1 - Y^2).
#include "ops/grad/grad_util.h"

namespace dprun {
namespace {

void tanh_grad(GradientContext& ctx) {
  std::string sq = ctx.emit("Mul", {ctx.O(0), ctx.O(0)});
  ctx.set_GI(0, ctx.emit("Mul", {ctx.GO(0), grad::one_minus(ctx, sq, ctx.dtype_of(ctx.O(0)))}));
}

DPRUN_REGISTER_GRADIENT({.op_type = "Tanh", .since = 1, .rule = tanh_grad});

}  // namespace
}  // namespace dprun
