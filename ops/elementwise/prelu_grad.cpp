// PRelu: Y = X where X >= 0, slope * X where X < 0, the slope broadcasting unidirectionally to
// X. So
//   dX     = dY * (1 where X > 0, slope elsewhere)   (X == 0 takes the slope, as PyTorch),
//   dslope = dY * (X where X <= 0, 0 elsewhere), summed back over the axes the slope was
//            broadcast along.
// The emitted nodes broadcast numpy-style, which needs opset 7 (before it, a 1-D slope of X's
// channel count applied per channel: Caffe-era models, refused with a clear error).
#include "ops/grad/grad_util.h"

namespace dprun {
namespace {

void prelu_grad(GradientContext& ctx) {
  if (ctx.onnx_opset() < 7) ctx.fail("needs ai.onnx opset >= 7 (numpy broadcasting)");
  const std::string& x = ctx.I(0);
  DType dt = ctx.dtype_of(x);
  std::string positive = ctx.cast(ctx.emit("Greater", {x, ctx.scalar(0, dt)}), dt);
  std::string negative = ctx.emit("Sub", {ctx.scalar(1, dt), positive});
  if (ctx.wants_GI(0)) {
    std::string local = ctx.emit("Add", {positive, ctx.emit("Mul", {negative, ctx.I(1)})});
    ctx.set_GI(0, ctx.emit("Mul", {ctx.GO(0), local}));
  }
  if (ctx.wants_GI(1)) {
    std::string g = ctx.emit("Mul", {ctx.GO(0), ctx.emit("Mul", {x, negative})});
    ctx.set_GI(1, ctx.unbroadcast(g, ctx.O(0), ctx.I(1)));
  }
}

DPRUN_REGISTER_GRADIENT({.op_type = "PRelu", .since = 1, .rule = prelu_grad});

}  // namespace
}  // namespace dprun
