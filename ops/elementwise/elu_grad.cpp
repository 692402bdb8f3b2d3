// Elu: Y = X for X > 0, alpha * (exp(X) - 1) elsewhere, so dY/dX is 1 for X > 0 and
// alpha * exp(X) = Y + alpha elsewhere. The 0-d constants broadcast as B (with broadcast=1
// before opset 7).
#include "ops/grad/grad_util.h"

namespace dprun {
namespace {

void elu_grad(GradientContext& ctx) {
  const std::string& x = ctx.I(0);
  DType dt = ctx.dtype_of(x);
  double alpha = ctx.node().attr_float("alpha", 1.0f);
  const auto b = grad::legacy_broadcast(ctx);
  std::string above = ctx.emit("Greater", {x, ctx.scalar(0, dt)}, b);
  std::string positive = ctx.cast(above, dt);
  std::string negative = ctx.cast(ctx.emit("Not", {above}), dt);
  std::string slope_neg = ctx.emit("Add", {ctx.O(0), ctx.scalar(alpha, dt)}, b);
  std::string slope = ctx.emit("Add", {positive, ctx.emit("Mul", {negative, slope_neg})});
  ctx.set_GI(0, ctx.emit("Mul", {ctx.GO(0), slope}));
}

DPRUN_REGISTER_GRADIENT({.op_type = "Elu", .since = 1, .rule = elu_grad});

}  // namespace
}  // namespace dprun
