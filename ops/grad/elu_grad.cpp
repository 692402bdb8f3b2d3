// Elu: Y = X for X > 0, alpha * (exp(X) - 1) elsewhere, so dY/dX is 1 for X > 0 and
// alpha * exp(X) = Y + alpha elsewhere.
#include "ops/grad/grad_util.h"

namespace dprun {
namespace {

void elu_grad(GradientContext& ctx) {
  const std::string& x = ctx.I(0);
  DType dt = ctx.dtype_of(x);
  double alpha = ctx.node().attr_float("alpha", 1.0f);
  std::string positive = ctx.cast(ctx.emit("Greater", {x, ctx.scalar(0, dt)}), dt);
  std::string negative = ctx.emit("Sub", {ctx.scalar(1, dt), positive});
  std::string slope_neg = ctx.emit("Add", {ctx.O(0), ctx.scalar(alpha, dt)});
  std::string slope = ctx.emit("Add", {positive, ctx.emit("Mul", {negative, slope_neg})});
  ctx.set_GI(0, ctx.emit("Mul", {ctx.GO(0), slope}));
}

DPRUN_REGISTER_GRADIENT({.op_type = "Elu", .since = 1, .rule = elu_grad});

}  // namespace
}  // namespace dprun
