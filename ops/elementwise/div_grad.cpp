// Div: Y = A / B, dA = dY / B, dB = -dY * Y / B. Before opset 7 B broadcasts onto A only with
// broadcast=1 (Y shaped like A): the divisions by B pass it on.
#include "ops/grad/grad_util.h"

namespace dprun {
namespace {

void div_grad(GradientContext& ctx) {
  grad::check_legacy_broadcast(ctx);
  if (is_integral(ctx.dtype_of(ctx.I(0)))) return;  // integer division has no gradient
  if (ctx.wants_GI(0))
    ctx.set_GI(
        0, ctx.unbroadcast(ctx.emit("Div", {ctx.GO(0), ctx.I(1)}, grad::node_legacy_broadcast(ctx)),
                           ctx.O(0), ctx.I(0)));
  if (ctx.wants_GI(1)) {
    std::string ratio = ctx.emit("Div", {ctx.O(0), ctx.I(1)}, grad::node_legacy_broadcast(ctx));
    std::string g = ctx.emit("Neg", {ctx.emit("Mul", {ctx.GO(0), ratio})});
    ctx.set_GI(1, ctx.unbroadcast(g, ctx.O(0), ctx.I(1)));
  }
}

DPRUN_REGISTER_GRADIENT({.op_type = "Div", .since = 1, .rule = div_grad});

}  // namespace
}  // namespace dprun
