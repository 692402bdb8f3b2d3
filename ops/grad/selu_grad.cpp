// Selu: Y = gamma * X for X > 0, gamma * alpha * (exp(X) - 1) elsewhere, so dY/dX is gamma for
// X > 0 and gamma * alpha * exp(X) = Y + gamma * alpha elsewhere.
#include "ops/grad/grad_util.h"

namespace dprun {
namespace {

void selu_grad(GradientContext& ctx) {
  const std::string& x = ctx.I(0);
  DType dt = ctx.dtype_of(x);
  double alpha = ctx.node().attr_float("alpha", 1.67326319217681884765625f);
  double gamma = ctx.node().attr_float("gamma", 1.05070102214813232421875f);
  std::string positive = ctx.cast(ctx.emit("Greater", {x, ctx.scalar(0, dt)}), dt);
  std::string negative = ctx.emit("Sub", {ctx.scalar(1, dt), positive});
  std::string slope_neg = ctx.emit("Add", {ctx.O(0), ctx.scalar(gamma * alpha, dt)});
  std::string slope = ctx.emit("Add", {ctx.emit("Mul", {positive, ctx.scalar(gamma, dt)}),
                                       ctx.emit("Mul", {negative, slope_neg})});
  ctx.set_GI(0, ctx.emit("Mul", {ctx.GO(0), slope}));
}

DPRUN_REGISTER_GRADIENT({.op_type = "Selu", .since = 1, .rule = selu_grad});

}  // namespace
}  // namespace dprun
