// LayerNormalization over the axes [axis, rank): with xhat = (X - mean) * inv (inv = 1 /
// sqrt(var + epsilon)) and Y = xhat * Scale + B,
//   dB     = dY summed over the leading axes (down to B's shape),
//   dScale = dY * xhat summed likewise,
//   dX     = inv * (dxhat - mean(dxhat) - xhat * mean(dxhat * xhat)),  dxhat = dY * Scale,
// the means over the normalized axes. The optional outputs Mean and InvStdDev are reused when
// the node has them, and gradients arriving at them are added:
//   dX += dMean / n - dInvStdDev * inv^2 * xhat / n   (n = elements normalized together).
#include "ops/grad/grad_util.h"

namespace dprun {
namespace {

struct Stats {
  std::string mean, inv, xhat;
  std::vector<int64_t> axes;  // the normalized axes
};

std::vector<int64_t> normalized_axes(GradientContext& ctx, int64_t axis) {
  int64_t end = 0;  // negative axes need no rank: they count from the end
  if (axis >= 0) end = ctx.require_rank(ctx.I(0));
  std::vector<int64_t> axes;
  for (int64_t a = axis; a < end; ++a) axes.push_back(a);
  return axes;
}

// Mean and InvStdDev as X's type: the node's own outputs when it has them, else recomputed.
Stats stats(GradientContext& ctx) {
  const std::string& x = ctx.I(0);
  DType dt = ctx.dtype_of(x);
  Stats s;
  s.axes = normalized_axes(ctx, ctx.node().attr_int("axis", -1));
  auto output = [&](size_t i) -> std::string {
    if (ctx.output_count() <= i || ctx.O(i).empty()) return {};
    return ctx.dtype_of(ctx.O(i)) == dt ? ctx.O(i) : ctx.cast(ctx.O(i), dt);
  };
  s.mean = output(1);
  s.inv = output(2);
  if (s.mean.empty()) s.mean = grad::reduce(ctx, "ReduceMean", x, s.axes, true);
  std::string centered = ctx.emit("Sub", {x, s.mean});
  if (s.inv.empty()) {
    std::string var =
        grad::reduce(ctx, "ReduceMean", ctx.emit("Mul", {centered, centered}), s.axes, true);
    double eps = ctx.node().attr_float("epsilon", 1e-5f);
    s.inv =
        ctx.emit("Reciprocal", {ctx.emit("Sqrt", {ctx.emit("Add", {var, ctx.scalar(eps, dt)})})});
  }
  s.xhat = ctx.emit("Mul", {centered, s.inv});
  return s;
}

std::string mean_over(GradientContext& ctx, const Stats& s, const std::string& v) {
  return grad::reduce(ctx, "ReduceMean", v, s.axes, true);
}

// The contribution of dY to dX.
std::string dx_from_y(GradientContext& ctx, const Stats& s) {
  std::string dxhat = ctx.emit("Mul", {ctx.GO(0), ctx.I(1)});
  std::string proj = ctx.emit("Mul", {s.xhat, mean_over(ctx, s, ctx.emit("Mul", {dxhat, s.xhat}))});
  std::string centered =
      ctx.emit("Sub", {ctx.emit("Sub", {dxhat, mean_over(ctx, s, dxhat)}), proj});
  return ctx.emit("Mul", {s.inv, centered});
}

// The contributions of dMean and dInvStdDev to dX.
std::vector<std::string> dx_from_stats(GradientContext& ctx, const Stats& s) {
  std::vector<std::string> parts;
  if (!ctx.has_GO(1) && !ctx.has_GO(2)) return parts;
  DType dt = ctx.dtype_of(ctx.I(0));
  std::string n =
      ctx.cast(ctx.emit("Div", {ctx.emit("Size", {ctx.I(0)}), ctx.emit("Size", {s.mean})}), dt);
  if (ctx.has_GO(1)) {  // expanded: it may be the only part
    std::string d_mean = ctx.emit("Div", {ctx.cast(ctx.GO(1), dt), n});
    parts.push_back(ctx.emit("Expand", {d_mean, ctx.emit("Shape", {ctx.I(0)})}));
  }
  if (ctx.has_GO(2)) {
    std::string inv2 = ctx.emit("Mul", {s.inv, s.inv});
    std::string t = ctx.emit("Mul", {ctx.emit("Mul", {ctx.cast(ctx.GO(2), dt), inv2}), s.xhat});
    parts.push_back(ctx.emit("Neg", {ctx.emit("Div", {t, n})}));
  }
  return parts;
}

void layer_norm_grad(GradientContext& ctx) {
  Stats s = stats(ctx);
  if (ctx.has_GO(0) && ctx.wants_GI(2))
    ctx.set_GI(2, ctx.unbroadcast(ctx.GO(0), ctx.O(0), ctx.I(2)));
  if (ctx.has_GO(0) && ctx.wants_GI(1))
    ctx.set_GI(1, ctx.unbroadcast(ctx.emit("Mul", {ctx.GO(0), s.xhat}), ctx.O(0), ctx.I(1)));
  if (!ctx.wants_GI(0)) return;
  std::vector<std::string> parts = dx_from_stats(ctx, s);
  if (ctx.has_GO(0)) parts.push_back(dx_from_y(ctx, s));
  ctx.set_GI(0, parts.size() == 1 ? parts[0] : ctx.emit("Sum", parts));
}

DPRUN_REGISTER_GRADIENT({.op_type = "LayerNormalization", .since = 1, .rule = layer_norm_grad});

}  // namespace
}  // namespace dprun
