// TopK: each value is the element of X its index names along `axis`, and the indices of one
// slice are distinct, so dX is zeros shaped like X with dValues written at Indices (a plain
// ScatterElements; Scatter at opsets 9 and 10). largest/sorted change which elements are
// picked, which Indices already records. Indices carry no gradient.
#include "ops/grad/grad_util.h"

namespace dprun {
namespace {

void topk_grad(GradientContext& ctx) {
  if (!ctx.has_GO(0)) return;
  if (ctx.onnx_opset() < 9) ctx.fail("needs ai.onnx opset >= 9 (ConstantOfShape, Scatter)");
  const char* scatter = ctx.onnx_opset() >= 11 ? "ScatterElements" : "Scatter";
  ctx.set_GI(0, ctx.emit(scatter, {grad::zeros_like(ctx, ctx.I(0)), ctx.O(1), ctx.GO(0)},
                         {{"axis", Attribute::of_int(ctx.node().attr_int("axis", -1))}}));
}

DPRUN_REGISTER_GRADIENT({.op_type = "TopK", .since = 1, .rule = topk_grad});

}  // namespace
}  // namespace dprun
