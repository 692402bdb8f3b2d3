// Exp: dX = dY * Y.
#include "ops/grad/grad_util.h"

namespace dprun {
namespace {

void exp_grad(GradientContext& ctx) {
  ctx.set_GI(0, ctx.emit("Mul", {ctx.GO(0), ctx.O(0)}));
}

DPRUN_REGISTER_GRADIENT({.op_type = "Exp", .since = 1, .rule = exp_grad});

}  // namespace
}  // namespace dprun
