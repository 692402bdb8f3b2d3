// LeakyRelu: dX = dY where X > 0, dY * alpha elsewhere (X == 0 takes alpha, as PyTorch).
#include "ops/grad/grad_util.h"

namespace dprun {
namespace {

void leaky_relu_grad(GradientContext& ctx) {
  const std::string& x = ctx.I(0);
  DType dt = ctx.dtype_of(x);
  double alpha = ctx.node().attr_float("alpha", 0.01f);
  std::string positive = ctx.cast(ctx.emit("Greater", {x, ctx.scalar(0, dt)}), dt);
  // alpha + (1 - alpha) * positive
  std::string slope = ctx.emit(
      "Add", {ctx.emit("Mul", {positive, ctx.scalar(1 - alpha, dt)}), ctx.scalar(alpha, dt)});
  ctx.set_GI(0, ctx.emit("Mul", {ctx.GO(0), slope}));
}

DPRUN_REGISTER_GRADIENT({.op_type = "LeakyRelu", .since = 1, .rule = leaky_relu_grad});

}  // namespace
}  // namespace dprun
