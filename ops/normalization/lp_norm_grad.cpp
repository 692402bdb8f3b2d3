// LpNormalization: Y = X / n along `axis`, n = sum(|X|) (p = 1) or sqrt(sum(X^2)) (p = 2), as
// ops/normalization/lp_norm.cpp runs it. With s = n * dn/dX, sign(X) for p = 1 and X / n = Y for p
// = 2,
//   dX = (dY - s * sum(dY * Y)) / n,
// the sum along the axis. A zero norm gives zeros forward (the kernel's choice, not a limit), and
// its gradient is taken as zero too (from opset 9, where Where exists; before, inf or NaN). The
// emitted nodes broadcast numpy-style: opset 7 on.
#include "ops/grad/grad_util.h"

namespace dprun {
namespace {

// The axis as the emitted Reduce* nodes take it: negative axes only from opset 11 on.
int64_t reduce_axis(GradientContext& ctx) {
  int64_t axis = ctx.node().attr_int("axis", -1);
  if (axis >= 0 || ctx.onnx_opset() >= 11) return axis;
  return normalize_axis(axis, ctx.require_rank(ctx.I(0)));
}

// 1 / n, or 0 where n is 0.
std::string inverse_norm(GradientContext& ctx, const std::string& n) {
  std::string inv = ctx.emit("Reciprocal", {n});
  if (ctx.onnx_opset() < 9) return inv;
  DType dt = ctx.dtype_of(ctx.I(0));
  std::string zero = ctx.scalar(0, dt);
  return ctx.emit("Where", {ctx.emit("Equal", {n, zero}), zero, inv});
}

// sign(x) as (x > 0) - (x < 0): Sign needs opset 9.
std::string sign(GradientContext& ctx, const std::string& x) {
  DType dt = ctx.dtype_of(x);
  std::string zero = ctx.scalar(0, dt);
  return ctx.emit("Sub", {ctx.cast(ctx.emit("Greater", {x, zero}), dt),
                          ctx.cast(ctx.emit("Less", {x, zero}), dt)});
}

void lp_norm_grad(GradientContext& ctx) {
  if (ctx.onnx_opset() < 7) ctx.fail("needs ai.onnx opset >= 7 (numpy broadcasting)");
  int64_t p = ctx.node().attr_int("p", 2);
  if (p != 1 && p != 2) ctx.fail("p must be 1 or 2, got ", p);
  const std::string& x = ctx.I(0);
  const std::string& y = ctx.O(0);
  std::vector<int64_t> axes = {reduce_axis(ctx)};
  std::string n = grad::reduce(ctx, p == 1 ? "ReduceL1" : "ReduceL2", x, axes, true);
  std::string along = grad::reduce(ctx, "ReduceSum", ctx.emit("Mul", {ctx.GO(0), y}), axes, true);
  std::string s = p == 1 ? sign(ctx, x) : y;
  std::string centered = ctx.emit("Sub", {ctx.GO(0), ctx.emit("Mul", {s, along})});
  ctx.set_GI(0, ctx.emit("Mul", {centered, inverse_norm(ctx, n)}));
}

DPRUN_REGISTER_GRADIENT({.op_type = "LpNormalization", .since = 1, .rule = lp_norm_grad});

}  // namespace
}  // namespace dprun
