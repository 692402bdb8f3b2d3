// HardSwish: Y = X * clamp(X / 6 + 1/2, 0, 1), so dY/dX is 0 below -3, X / 3 + 1/2 on
// [-3, 3] and 1 above 3 (the boundaries as PyTorch's hardswish_backward).
#include "ops/grad/grad_util.h"

namespace dprun {
namespace {

void hard_swish_grad(GradientContext& ctx) {
  const std::string& x = ctx.I(0);
  DType dt = ctx.dtype_of(x);
  std::string middle =
      ctx.emit("Add", {ctx.emit("Div", {x, ctx.scalar(3, dt)}), ctx.scalar(0.5, dt)});
  std::string upper =
      ctx.emit("Where", {ctx.emit("Greater", {x, ctx.scalar(3, dt)}), ctx.scalar(1, dt), middle});
  std::string slope =
      ctx.emit("Where", {ctx.emit("Less", {x, ctx.scalar(-3, dt)}), ctx.scalar(0, dt), upper});
  ctx.set_GI(0, ctx.emit("Mul", {ctx.GO(0), slope}));
}

DPRUN_REGISTER_GRADIENT({.op_type = "HardSwish", .since = 14, .rule = hard_swish_grad});

}  // namespace
}  // namespace dprun
