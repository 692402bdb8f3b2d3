// Neg: dX = -dY.
#include "ops/grad/grad_util.h"

namespace dprun {
namespace {

void neg_grad(GradientContext& ctx) {
  ctx.set_GI(0, ctx.emit("Neg", {ctx.GO(0)}));
}

DPRUN_REGISTER_GRADIENT({.op_type = "Neg", .since = 1, .rule = neg_grad});

}  // namespace
}  // namespace dprun
