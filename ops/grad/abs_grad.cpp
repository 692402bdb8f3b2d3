// Abs: dX = dY * sign(X), 0 at X == 0 (as PyTorch). Sign exists from opset 9; before, the sign
// is (X > 0) - (X < 0).
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
    std::string zero = ctx.scalar(0, dt);
    sign = ctx.emit("Sub", {ctx.cast(ctx.emit("Greater", {x, zero}), dt),
                            ctx.cast(ctx.emit("Less", {x, zero}), dt)});
  }
  ctx.set_GI(0, ctx.emit("Mul", {ctx.GO(0), sign}));
}

DPRUN_REGISTER_GRADIENT({.op_type = "Abs", .since = 1, .rule = abs_grad});

}  // namespace
}  // namespace dprun
