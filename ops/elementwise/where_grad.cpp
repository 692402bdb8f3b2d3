// Where: dY flows to X where the condition holds and to Y elsewhere, each summed back over
// the axes it was broadcast along. The condition gets none.
#include "ops/grad/grad_util.h"

namespace dprun {
namespace {

void where_grad(GradientContext& ctx) {
  const std::string &cond = ctx.I(0), &go = ctx.GO(0);
  std::string zero = ctx.scalar(0, ctx.dtype_of(ctx.O(0)));
  if (ctx.wants_GI(1))
    ctx.set_GI(1, ctx.unbroadcast(ctx.emit("Where", {cond, go, zero}), ctx.O(0), ctx.I(1)));
  if (ctx.wants_GI(2))
    ctx.set_GI(2, ctx.unbroadcast(ctx.emit("Where", {cond, zero, go}), ctx.O(0), ctx.I(2)));
}

DPRUN_REGISTER_GRADIENT({.op_type = "Where", .since = 9, .rule = where_grad});

}  // namespace
}  // namespace dprun
