// Mul: dA = dY * B, dB = dY * A, each summed back over broadcast axes. Before opset 7 B
// broadcasts onto A only with broadcast=1 (Y shaped like A): dY * B passes it on.
#include "ops/grad/grad_util.h"

namespace dprun {
namespace {

void mul_grad(GradientContext& ctx) {
  grad::check_legacy_broadcast(ctx);
  if (ctx.wants_GI(0))
    ctx.set_GI(
        0, ctx.unbroadcast(ctx.emit("Mul", {ctx.GO(0), ctx.I(1)}, grad::node_legacy_broadcast(ctx)),
                           ctx.O(0), ctx.I(0)));
  if (ctx.wants_GI(1))
    ctx.set_GI(1, ctx.unbroadcast(ctx.emit("Mul", {ctx.GO(0), ctx.I(0)}), ctx.O(0), ctx.I(1)));
}

DPRUN_REGISTER_GRADIENT({.op_type = "Mul", .since = 1, .rule = mul_grad});

}  // namespace
}  // namespace dprun
