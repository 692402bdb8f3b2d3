// Erf: dX = dY * 2 / sqrt(pi) * exp(-X^2).
#include <numbers>

#include "ops/grad/grad_util.h"

namespace dprun {
namespace {

void erf_grad(GradientContext& ctx) {
  const std::string& x = ctx.I(0);
  DType dt = ctx.dtype_of(x);
  std::string gauss = ctx.emit("Exp", {ctx.emit("Neg", {ctx.emit("Mul", {x, x})})});
  std::string slope = ctx.emit("Mul", {gauss, ctx.scalar(2 * std::numbers::inv_sqrtpi, dt)});
  ctx.set_GI(0, ctx.emit("Mul", {ctx.GO(0), slope}));
}

DPRUN_REGISTER_GRADIENT({.op_type = "Erf", .since = 9, .rule = erf_grad});

}  // namespace
}  // namespace dprun
