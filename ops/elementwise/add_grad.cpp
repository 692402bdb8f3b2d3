// Add: both inputs receive the output gradient, summed back over broadcast axes.
#include "ops/grad/grad_util.h"

namespace dprun {
namespace {

void add_grad(GradientContext& ctx) {
  grad::check_legacy_broadcast(ctx);
  for (size_t i = 0; i < 2; ++i)
    if (ctx.wants_GI(i)) ctx.set_GI(i, ctx.unbroadcast(ctx.GO(0), ctx.O(0), ctx.I(i)));
}

DPRUN_REGISTER_GRADIENT({.op_type = "Add", .since = 1, .rule = add_grad});

}  // namespace
}  // namespace dprun
