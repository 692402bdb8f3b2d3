// Sigmoid: dX = dY * Y * (1 - Y).
#include "ops/grad/grad_util.h"

namespace dprun {
namespace {

void sigmoid_grad(GradientContext& ctx) {
  std::string one_minus = ctx.emit("Sub", {ctx.scalar(1, ctx.dtype_of(ctx.O(0))), ctx.O(0)});
  ctx.set_GI(0, ctx.emit("Mul", {ctx.GO(0), ctx.emit("Mul", {ctx.O(0), one_minus})}));
}

DPRUN_REGISTER_GRADIENT({.op_type = "Sigmoid", .since = 1, .rule = sigmoid_grad});

}  // namespace
}  // namespace dprun
