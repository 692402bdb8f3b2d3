// Mish: Y = X * tanh(softplus(X)), so with t = tanh(softplus(X)) and softplus' = sigmoid,
//   dX = dY * (t + X * (1 - t^2) * sigmoid(X)).
#include "ops/grad/grad_util.h"

namespace dprun {
namespace {

void mish_grad(GradientContext& ctx) {
  const std::string& x = ctx.I(0);
  DType dt = ctx.dtype_of(x);
  std::string t = ctx.emit("Tanh", {ctx.emit("Softplus", {x})});
  std::string sech2 = ctx.emit("Sub", {ctx.scalar(1, dt), ctx.emit("Mul", {t, t})});
  std::string inner = ctx.emit("Mul", {ctx.emit("Mul", {x, sech2}), ctx.emit("Sigmoid", {x})});
  ctx.set_GI(0, ctx.emit("Mul", {ctx.GO(0), ctx.emit("Add", {t, inner})}));
}

DPRUN_REGISTER_GRADIENT({.op_type = "Mish", .since = 18, .rule = mish_grad});

}  // namespace
}  // namespace dprun
