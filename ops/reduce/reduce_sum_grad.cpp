// ReduceSum: dX = dY broadcast back over the reduced axes.
#include "ops/grad/grad_util.h"

namespace dprun {
namespace {

void reduce_sum_grad(GradientContext& ctx) {
  ctx.set_GI(0, grad::expand_reduced_grad(ctx, grad::reduce_axes(ctx)));
}

DPRUN_REGISTER_GRADIENT({.op_type = "ReduceSum", .since = 1, .rule = reduce_sum_grad});

}  // namespace
}  // namespace dprun
