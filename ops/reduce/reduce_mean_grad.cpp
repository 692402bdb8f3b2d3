// ReduceMean: dX = dY broadcast back over the reduced axes, divided by the number of
// elements averaged (|X| / |Y|).
#include "ops/grad/grad_util.h"

namespace dprun {
namespace {

void reduce_mean_grad(GradientContext& ctx) {
  grad::ReduceAxes axes = grad::reduce_axes(ctx);
  std::string g = grad::expand_reduced_grad(ctx, axes);
  if (axes.identity) {
    ctx.set_GI(0, g);
    return;
  }
  std::string count = ctx.emit("Div", {ctx.emit("Size", {ctx.I(0)}), ctx.emit("Size", {ctx.O(0)})});
  ctx.set_GI(0, ctx.emit("Div", {g, ctx.cast(count, ctx.dtype_of(ctx.I(0)))}));
}

DPRUN_REGISTER_GRADIENT({.op_type = "ReduceMean", .since = 1, .rule = reduce_mean_grad});

}  // namespace
}  // namespace dprun
