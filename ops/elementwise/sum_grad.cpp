// Sum (variadic): every input receives dY, summed back over broadcast axes.
#include "ops/grad/grad_util.h"

namespace dprun {
namespace {

void sum_grad(GradientContext& ctx) {
  for (size_t i = 0; i < ctx.input_count(); ++i)
    if (ctx.wants_GI(i)) ctx.set_GI(i, ctx.unbroadcast(ctx.GO(0), ctx.O(0), ctx.I(i)));
}

DPRUN_REGISTER_GRADIENT({.op_type = "Sum", .since = 1, .rule = sum_grad});

}  // namespace
}  // namespace dprun
