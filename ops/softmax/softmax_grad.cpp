// Softmax: dX = Y * (dY - sum(dY * Y)) with the sum over the softmax axis (before opset 13,
// over the trailing dimensions flattened at `axis`).
#include "ops/grad/grad_util.h"

namespace dprun {
namespace {

void softmax_grad(GradientContext& ctx) {
  grad::SoftmaxAxis sa = grad::softmax_axis(ctx);
  std::string y = ctx.O(0), g = ctx.GO(0);
  int64_t axis = sa.axis;
  if (sa.flattened) {
    y = ctx.emit("Flatten", {y}, {{"axis", Attribute::of_int(axis)}});
    g = ctx.emit("Flatten", {g}, {{"axis", Attribute::of_int(axis)}});
    axis = 1;
  }
  std::string dot = ctx.reduce_sum(ctx.emit("Mul", {g, y}), {axis}, true);
  std::string dx = ctx.emit("Mul", {y, ctx.emit("Sub", {g, dot})});
  ctx.set_GI(0, sa.flattened ? ctx.reshape_like(dx, ctx.I(0)) : dx);
}

DPRUN_REGISTER_GRADIENT({.op_type = "Softmax", .since = 1, .rule = softmax_grad});

}  // namespace
}  // namespace dprun
