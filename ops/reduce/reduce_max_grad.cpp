// ReduceMax and ReduceMin: dY goes to the elements equal to the result, split evenly between
// ties (as PyTorch's amax/amin do). "Equal" is tested as not below the maximum (not above the
// minimum), so no float Equal is needed.
#include "ops/grad/grad_util.h"

namespace dprun {
namespace {

void extremum_grad(GradientContext& ctx, const char* beaten_by) {
  grad::ReduceAxes axes = grad::reduce_axes(ctx);
  if (axes.identity) {
    ctx.set_GI(0, ctx.GO(0));
    return;
  }
  const std::string& x = ctx.I(0);
  std::string y = grad::expand_reduced_grad(ctx, axes, ctx.O(0));
  std::string hit = ctx.cast(ctx.emit("Not", {ctx.emit(beaten_by, {x, y})}), ctx.dtype_of(x));
  // The number of ties per reduced group, kept broadcastable over X.
  std::string ties;
  if (axes.dynamic)
    ties = ctx.emit("ReduceSum", {hit, ctx.I(1)}, {{"keepdims", Attribute::of_int(1)}});
  else
    ties = grad::reduce(ctx, "ReduceSum", hit, axes.all ? std::vector<int64_t>{} : axes.axes, true);
  std::string g = grad::expand_reduced_grad(ctx, axes);
  ctx.set_GI(0, ctx.emit("Div", {ctx.emit("Mul", {g, hit}), ties}));
}

void reduce_max_grad(GradientContext& ctx) {
  extremum_grad(ctx, "Less");
}
void reduce_min_grad(GradientContext& ctx) {
  extremum_grad(ctx, "Greater");
}

DPRUN_REGISTER_GRADIENT({.op_type = "ReduceMax", .since = 1, .rule = reduce_max_grad});
DPRUN_REGISTER_GRADIENT({.op_type = "ReduceMin", .since = 1, .rule = reduce_min_grad});

}  // namespace
}  // namespace dprun
