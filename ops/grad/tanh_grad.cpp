// Tanh: dX = dY * (1 - Y^2).
#include "ops/grad/grad_util.h"

namespace dprun {
namespace {

void tanh_grad(GradientContext& ctx) {
  std::string sq = ctx.emit("Mul", {ctx.O(0), ctx.O(0)});
  std::string one_minus = ctx.emit("Sub", {ctx.scalar(1, ctx.dtype_of(ctx.O(0))), sq});
  ctx.set_GI(0, ctx.emit("Mul", {ctx.GO(0), one_minus}));
}

DPRUN_REGISTER_GRADIENT({.op_type = "Tanh", .since = 1, .rule = tanh_grad});

}  // namespace
}  // namespace dprun
