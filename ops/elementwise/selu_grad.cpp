// Selu: Y = gamma * X for X > 0, gamma * alpha * (exp(X) - 1) elsewhere, so dY/dX is gamma for
// X > 0 and gamma * alpha * exp(X) = Y + gamma * alpha elsewhere. The 0-d constants broadcast
// as B (with broadcast=1 before opset 7).
#include "ops/grad/grad_util.h"

namespace dprun {
namespace {

void selu_grad(GradientContext& ctx) {
  const std::string& x = ctx.I(0);
  DType dt = ctx.dtype_of(x);
  double alpha = ctx.node().attr_float("alpha", 1.67326319217681884765625f);
  double gamma = ctx.node().attr_float("gamma", 1.05070102214813232421875f);
  const auto b = grad::legacy_broadcast(ctx);
  std::string above = ctx.emit("Greater", {x, ctx.scalar(0, dt)}, b);
  std::string positive = ctx.cast(above, dt);
  std::string negative = ctx.cast(ctx.emit("Not", {above}), dt);
  std::string slope_neg = ctx.emit("Add", {ctx.O(0), ctx.scalar(gamma * alpha, dt)}, b);
  std::string slope = ctx.emit("Add", {ctx.emit("Mul", {positive, ctx.scalar(gamma, dt)}, b),
                                       ctx.emit("Mul", {negative, slope_neg})});
  ctx.set_GI(0, ctx.emit("Mul", {ctx.GO(0), slope}));
}

DPRUN_REGISTER_GRADIENT({.op_type = "Selu", .since = 1, .rule = selu_grad});

}  // namespace
}  // namespace dprun
