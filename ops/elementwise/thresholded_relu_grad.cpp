// ThresholdedRelu: Y = X where X > alpha, 0 elsewhere, so dX = dY where X > alpha, 0 elsewhere.
// The emitted Greater broadcasts alpha numpy-style: opset 7 on.
#include "ops/grad/grad_util.h"

namespace dprun {
namespace {

void thresholded_relu_grad(GradientContext& ctx) {
  if (ctx.onnx_opset() < 7) ctx.fail("needs ai.onnx opset >= 7 (numpy broadcasting)");
  const std::string& x = ctx.I(0);
  DType dt = ctx.dtype_of(x);
  double alpha = ctx.node().attr_float("alpha", 1.0f);
  std::string above = ctx.cast(ctx.emit("Greater", {x, ctx.scalar(alpha, dt)}), dt);
  ctx.set_GI(0, ctx.emit("Mul", {ctx.GO(0), above}));
}

DPRUN_REGISTER_GRADIENT({.op_type = "ThresholdedRelu", .since = 1, .rule = thresholded_relu_grad});

}  // namespace
}  // namespace dprun
