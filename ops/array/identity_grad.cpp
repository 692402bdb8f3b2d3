// Identity: dX = dY.
#include "ops/grad/grad_util.h"

namespace dprun {
namespace {

void identity_grad(GradientContext& ctx) {
  ctx.set_GI(0, ctx.emit("Identity", {ctx.GO(0)}));
}

DPRUN_REGISTER_GRADIENT({.op_type = "Identity", .since = 1, .rule = identity_grad});

}  // namespace
}  // namespace dprun
