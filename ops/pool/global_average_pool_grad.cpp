// GlobalAveragePool: dX = dY broadcast over the spatial axes, divided by their size.
#include "ops/grad/grad_util.h"

namespace dprun {
namespace {

void global_average_pool_grad(GradientContext& ctx) {
  if (ctx.onnx_opset() < 8)
    ctx.fail("needs ai.onnx opset >= 8 (Expand), the graph imports ", ctx.onnx_opset());
  const std::string& x = ctx.I(0);
  std::string g = ctx.emit("Expand", {ctx.GO(0), ctx.emit("Shape", {x})});
  std::string count = ctx.emit("Div", {ctx.emit("Size", {x}), ctx.emit("Size", {ctx.GO(0)})});
  ctx.set_GI(0, ctx.emit("Div", {g, ctx.cast(count, ctx.dtype_of(x))}));
}

DPRUN_REGISTER_GRADIENT({.op_type = "GlobalAveragePool",
                         .since = 1,
                         .rule = global_average_pool_grad});

}  // namespace
}  // namespace dprun
