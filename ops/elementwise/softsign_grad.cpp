// Softsign: Y = X / (1 + |X|), dX = dY / (1 + |X|)^2. The emitted nodes broadcast a constant
// numpy-style: opset 7 on.
#include "ops/grad/grad_util.h"

namespace dprun {
namespace {

void softsign_grad(GradientContext& ctx) {
  if (ctx.onnx_opset() < 7) ctx.fail("needs ai.onnx opset >= 7 (numpy broadcasting)");
  const std::string& x = ctx.I(0);
  std::string d = ctx.emit("Add", {ctx.scalar(1, ctx.dtype_of(x)), ctx.emit("Abs", {x})});
  ctx.set_GI(0, ctx.emit("Div", {ctx.GO(0), ctx.emit("Mul", {d, d})}));
}

DPRUN_REGISTER_GRADIENT({.op_type = "Softsign", .since = 1, .rule = softsign_grad});

}  // namespace
}  // namespace dprun
