// Sqrt: dX = dY / (2 Y). The 0-d half broadcasts as B (with broadcast=1 before opset 7).
#include "ops/grad/grad_util.h"

namespace dprun {
namespace {

void sqrt_grad(GradientContext& ctx) {
  std::string half = ctx.emit("Mul", {ctx.GO(0), ctx.scalar(0.5, ctx.dtype_of(ctx.O(0)))},
                              grad::legacy_broadcast(ctx));
  ctx.set_GI(0, ctx.emit("Div", {half, ctx.O(0)}));
}

DPRUN_REGISTER_GRADIENT({.op_type = "Sqrt", .since = 1, .rule = sqrt_grad});

}  // namespace
}  // namespace dprun
