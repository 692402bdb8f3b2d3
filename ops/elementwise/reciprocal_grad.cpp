// Reciprocal: Y = 1 / X, dX = -dY * Y^2.
#include "ops/grad/grad_util.h"

namespace dprun {
namespace {

void reciprocal_grad(GradientContext& ctx) {
  const std::string& y = ctx.O(0);
  ctx.set_GI(0, ctx.emit("Neg", {ctx.emit("Mul", {ctx.GO(0), ctx.emit("Mul", {y, y})})}));
}

DPRUN_REGISTER_GRADIENT({.op_type = "Reciprocal", .since = 1, .rule = reciprocal_grad});

}  // namespace
}  // namespace dprun
