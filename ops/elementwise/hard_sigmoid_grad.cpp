// HardSigmoid: Y = clamp(alpha * X + beta, 0, 1), so dX = dY * alpha where 0 < Y < 1, else 0
// (open bounds, as PyTorch's hardsigmoid_backward). The 0-d constants broadcast as B (with
// broadcast=1 before opset 7).
#include "ops/grad/grad_util.h"

namespace dprun {
namespace {

void hard_sigmoid_grad(GradientContext& ctx) {
  const std::string& y = ctx.O(0);
  DType dt = ctx.dtype_of(y);
  double alpha = ctx.node().attr_float("alpha", 0.2f);
  const auto b = grad::legacy_broadcast(ctx);
  std::string inside = ctx.emit("And", {ctx.emit("Greater", {y, ctx.scalar(0, dt)}, b),
                                        ctx.emit("Less", {y, ctx.scalar(1, dt)}, b)});
  std::string slope = ctx.emit("Mul", {ctx.cast(inside, dt), ctx.scalar(alpha, dt)}, b);
  ctx.set_GI(0, ctx.emit("Mul", {ctx.GO(0), slope}));
}

DPRUN_REGISTER_GRADIENT({.op_type = "HardSigmoid", .since = 1, .rule = hard_sigmoid_grad});

}  // namespace
}  // namespace dprun
