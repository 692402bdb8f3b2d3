// Sub: dA = dY, dB = -dY, each summed back over broadcast axes.
#include "ops/grad/grad_util.h"

namespace dprun {
namespace {

void sub_grad(GradientContext& ctx) {
  grad::check_legacy_broadcast(ctx);
  if (ctx.wants_GI(0)) ctx.set_GI(0, ctx.unbroadcast(ctx.GO(0), ctx.O(0), ctx.I(0)));
  if (ctx.wants_GI(1))
    ctx.set_GI(1, ctx.unbroadcast(ctx.emit("Neg", {ctx.GO(0)}), ctx.O(0), ctx.I(1)));
}

DPRUN_REGISTER_GRADIENT({.op_type = "Sub", .since = 1, .rule = sub_grad});

}  // namespace
}  // namespace dprun
