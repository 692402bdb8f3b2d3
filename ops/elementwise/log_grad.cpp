// Log: dX = dY / X.
#include "ops/grad/grad_util.h"

namespace dprun {
namespace {

void log_grad(GradientContext& ctx) {
  ctx.set_GI(0, ctx.emit("Div", {ctx.GO(0), ctx.I(0)}));
}

DPRUN_REGISTER_GRADIENT({.op_type = "Log", .since = 1, .rule = log_grad});

}  // namespace
}  // namespace dprun
