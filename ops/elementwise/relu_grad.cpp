// Relu: dX = dY where X > 0, else 0 (the subgradient 0 at X == 0, as PyTorch). The 0-d zero
// broadcasts as B (with broadcast=1 before opset 7).
#include "ops/grad/grad_util.h"

namespace dprun {
namespace {

void relu_grad(GradientContext& ctx) {
  DType dt = ctx.dtype_of(ctx.I(0));
  std::string positive =
      ctx.emit("Greater", {ctx.I(0), ctx.scalar(0, dt)}, grad::legacy_broadcast(ctx));
  ctx.set_GI(0, ctx.emit("Mul", {ctx.GO(0), ctx.cast(positive, dt)}));
}

DPRUN_REGISTER_GRADIENT({.op_type = "Relu", .since = 1, .rule = relu_grad});

}  // namespace
}  // namespace dprun
