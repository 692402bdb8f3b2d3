// Celu: Y = X for X > 0, alpha * (exp(X / alpha) - 1) elsewhere, so dY/dX is 1 for X > 0 and
// exp(X / alpha) elsewhere: both are exp(min(X, 0) / alpha), which never overflows for a large
// positive X (a masked exp(X / alpha) would give inf * 0 = NaN there).
#include "ops/grad/grad_util.h"

namespace dprun {
namespace {

void celu_grad(GradientContext& ctx) {
  const std::string& x = ctx.I(0);
  DType dt = ctx.dtype_of(x);
  double alpha = ctx.node().attr_float("alpha", 1.0f);
  std::string nonpositive = ctx.emit("Min", {x, ctx.scalar(0, dt)});
  std::string slope = ctx.emit("Exp", {ctx.emit("Div", {nonpositive, ctx.scalar(alpha, dt)})});
  ctx.set_GI(0, ctx.emit("Mul", {ctx.GO(0), slope}));
}

DPRUN_REGISTER_GRADIENT({.op_type = "Celu", .since = 12, .rule = celu_grad});

}  // namespace
}  // namespace dprun
