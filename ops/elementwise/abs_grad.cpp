// Abs: dX = dY * sign(X), 0 at X == 0 (as PyTorch). Sign exists from opset 9; before, the sign
// is (X > 0) - (X < 0), the 0-d zero broadcast with broadcast=1 before opset 7.
#include "ops/grad/grad_util.h"

namespace dprun {
namespace {

void abs_grad(GradientContext& ctx) {
  const std::string& x = ctx.I(0);
  DType dt = ctx.dtype_of(x);
  std::string sign;
  if (ctx.onnx_opset() >= 9) {
    sign = ctx.emit("Sign", {x});
  } else {
    const auto scalar_b = grad::legacy_broadcast(ctx);
    std::string zero = ctx.scalar(0, dt);
    sign = ctx.emit("Sub", {ctx.cast(ctx.emit("Greater", {x, zero}, scalar_b), dt),
                            ctx.cast(ctx.emit("Less", {x, zero}, scalar_b), dt)});
  }
  ctx.set_GI(0, ctx.emit("Mul", {ctx.GO(0), sign}));
}

DPRUN_REGISTER_GRADIENT({.op_type = "Abs", .since = 1, .rule = abs_grad});

}  // namespace
}  // namespace dprun
