// LeakyRelu: dX = dY where X > 0, dY * alpha elsewhere (X == 0 takes alpha, as PyTorch). The
// 0-d constants broadcast as B (with broadcast=1 before opset 7).
#include "ops/grad/grad_util.h"

namespace dprun {
namespace {

void leaky_relu_grad(GradientContext& ctx) {
  const std::string& x = ctx.I(0);
  DType dt = ctx.dtype_of(x);
  double alpha = ctx.node().attr_float("alpha", 0.01f);
  const auto b = grad::legacy_broadcast(ctx);
  std::string positive = ctx.cast(ctx.emit("Greater", {x, ctx.scalar(0, dt)}, b), dt);
  // alpha + (1 - alpha) * positive
  std::string slope = ctx.emit(
      "Add", {ctx.emit("Mul", {positive, ctx.scalar(1 - alpha, dt)}, b), ctx.scalar(alpha, dt)}, b);
  ctx.set_GI(0, ctx.emit("Mul", {ctx.GO(0), slope}));
}

DPRUN_REGISTER_GRADIENT({.op_type = "LeakyRelu", .since = 1, .rule = leaky_relu_grad});

}  // namespace
}  // namespace dprun
