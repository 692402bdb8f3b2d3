// Softplus: Y = log(1 + exp(X)), dX = dY * sigmoid(X).
#include "ops/grad/grad_util.h"

namespace dprun {
namespace {

void softplus_grad(GradientContext& ctx) {
  ctx.set_GI(0, ctx.emit("Mul", {ctx.GO(0), ctx.emit("Sigmoid", {ctx.I(0)})}));
}

DPRUN_REGISTER_GRADIENT({.op_type = "Softplus", .since = 1, .rule = softplus_grad});

}  // namespace
}  // namespace dprun
