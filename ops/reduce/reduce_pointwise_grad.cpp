// Reductions whose gradient is dY broadcast back over X times a factor of X and Y:
//   ReduceL1:        Y = sum |X|         dX = dY * sign(X) (0 at X = 0, as PyTorch)
//   ReduceSumSquare: Y = sum X^2         dX = dY * 2 X
//   ReduceLogSum:    Y = log(sum X)      dX = dY / exp(Y)
//   ReduceLogSumExp: Y = log(sum e^X)    dX = dY * exp(X - Y)
// With noop_with_empty_axes and no axes the node copies X, so dX = dY.
#include "ops/grad/grad_util.h"

namespace dprun {
namespace {

// The factor for X given Y broadcast over X (`y`).
using Factor = std::string (*)(GradientContext& ctx, const std::string& x, const std::string& y);

void pointwise_reduce_grad(GradientContext& ctx, Factor factor, bool needs_y) {
  grad::ReduceAxes axes = grad::reduce_axes(ctx);
  std::string g = grad::expand_reduced_grad(ctx, axes);
  if (axes.identity) {
    ctx.set_GI(0, g);
    return;
  }
  std::string y = needs_y ? grad::expand_reduced_grad(ctx, axes, ctx.O(0)) : std::string();
  ctx.set_GI(0, ctx.emit("Mul", {g, factor(ctx, ctx.I(0), y)}));
}

// sign(X) as (X > 0) - (X < 0): no Sign op, which needs opset 9.
std::string l1_factor(GradientContext& ctx, const std::string& x, const std::string&) {
  DType dtype = ctx.dtype_of(x);
  std::string zero = ctx.scalar(0, dtype);
  return ctx.emit("Sub", {ctx.cast(ctx.emit("Greater", {x, zero}), dtype),
                          ctx.cast(ctx.emit("Less", {x, zero}), dtype)});
}

std::string sum_square_factor(GradientContext& ctx, const std::string& x, const std::string&) {
  return ctx.emit("Mul", {x, ctx.scalar(2, ctx.dtype_of(x))});
}

std::string log_sum_factor(GradientContext& ctx, const std::string&, const std::string& y) {
  return ctx.emit("Reciprocal", {ctx.emit("Exp", {y})});
}

std::string log_sum_exp_factor(GradientContext& ctx, const std::string& x, const std::string& y) {
  return ctx.emit("Exp", {ctx.emit("Sub", {x, y})});
}

void reduce_l1_grad(GradientContext& ctx) {
  pointwise_reduce_grad(ctx, l1_factor, false);
}
void reduce_sum_square_grad(GradientContext& ctx) {
  pointwise_reduce_grad(ctx, sum_square_factor, false);
}
void reduce_log_sum_grad(GradientContext& ctx) {
  pointwise_reduce_grad(ctx, log_sum_factor, true);
}
void reduce_log_sum_exp_grad(GradientContext& ctx) {
  pointwise_reduce_grad(ctx, log_sum_exp_factor, true);
}

DPRUN_REGISTER_GRADIENT({.op_type = "ReduceL1", .since = 1, .rule = reduce_l1_grad});
DPRUN_REGISTER_GRADIENT({.op_type = "ReduceSumSquare", .since = 1, .rule = reduce_sum_square_grad});
DPRUN_REGISTER_GRADIENT({.op_type = "ReduceLogSum", .since = 1, .rule = reduce_log_sum_grad});
DPRUN_REGISTER_GRADIENT({.op_type = "ReduceLogSumExp",
                         .since = 1,
                         .rule = reduce_log_sum_exp_grad});

}  // namespace
}  // namespace dprun
