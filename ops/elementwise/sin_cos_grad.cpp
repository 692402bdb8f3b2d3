// Sin: dX = dY * cos(X). Cos: dX = -dY * sin(X).
#include "ops/grad/grad_util.h"

namespace dprun {
namespace {

void sin_grad(GradientContext& ctx) {
  ctx.set_GI(0, ctx.emit("Mul", {ctx.GO(0), ctx.emit("Cos", {ctx.I(0)})}));
}

void cos_grad(GradientContext& ctx) {
  ctx.set_GI(0, ctx.emit("Neg", {ctx.emit("Mul", {ctx.GO(0), ctx.emit("Sin", {ctx.I(0)})})}));
}

DPRUN_REGISTER_GRADIENT({.op_type = "Sin", .since = 7, .rule = sin_grad});
DPRUN_REGISTER_GRADIENT({.op_type = "Cos", .since = 7, .rule = cos_grad});

}  // namespace
}  // namespace dprun
