// LogSoftmax: dX = dY - exp(Y) * sum(dY) with the sum over the softmax axis (before opset 13,
// over the trailing dimensions flattened at `axis`).
#include "ops/grad/grad_util.h"

namespace dprun {
namespace {

void log_softmax_grad(GradientContext& ctx) {
  grad::SoftmaxAxis sa = grad::softmax_axis(ctx);
  std::string y = ctx.O(0), g = ctx.GO(0);
  int64_t axis = sa.axis;
  if (sa.flattened) {
    y = ctx.emit("Flatten", {y}, {{"axis", Attribute::of_int(axis)}});
    g = ctx.emit("Flatten", {g}, {{"axis", Attribute::of_int(axis)}});
    axis = 1;
  }
  std::string total = ctx.reduce_sum(g, {axis}, true);
  std::string dx = ctx.emit("Sub", {g, ctx.emit("Mul", {ctx.emit("Exp", {y}), total})});
  ctx.set_GI(0, sa.flattened ? ctx.reshape_like(dx, ctx.I(0)) : dx);
}

DPRUN_REGISTER_GRADIENT({.op_type = "LogSoftmax", .since = 1, .rule = log_softmax_grad});

}  // namespace
}  // namespace dprun
