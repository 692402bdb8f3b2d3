// Sigmoid: dX = dY * Y * (1 - Y).
#include "ops/grad/grad_util.h"

namespace dprun {
namespace {

void sigmoid_grad(GradientContext& ctx) {
  const std::string& y = ctx.O(0);
  std::string slope = ctx.emit("Mul", {y, grad::one_minus(ctx, y, ctx.dtype_of(y))});
  ctx.set_GI(0, ctx.emit("Mul", {ctx.GO(0), slope}));
}

DPRUN_REGISTER_GRADIENT({.op_type = "Sigmoid", .since = 1, .rule = sigmoid_grad});

}  // namespace
}  // namespace dprun
