// InstanceNormalization and GroupNormalization on X [N, C, D1, ...], as
// ops/normalization/instance_norm.cpp runs them: each row (one per (n, c), resp. per (n, group)) is
// normalized with its own mean and population variance, then scaled and shifted per channel. With
// xhat = (X - mean) * inv (inv = 1 / sqrt(var + epsilon), both recomputed with ReduceMean) and Y =
// xhat * scale + B,
//   dB     = dY summed over every axis but the channel's (down to B's shape),
//   dscale = dY * xhat summed likewise,
//   dX     = inv * (dxhat - mean(dxhat) - xhat * mean(dxhat * xhat)),  dxhat = dY * scale,
// the means over each normalized row.
//
// The math runs in a "frame" where each row's elements share the trailing axes:
// InstanceNormalization uses X itself when its rank is known (axes 2...), else X reshaped to
// [N, C, S]; GroupNormalization reshapes X to [N, G, C/G, S] (axes 2 and 3), where its scale and
// B, of num_groups elements (opset 18) or of C (opset 21; the kernel takes either at any opset),
// broadcast as [1, G, 1, 1] or [1, G, C/G, 1]. The emitted nodes broadcast numpy-style, so
// InstanceNormalization's rule needs opset 7.
#include "ops/grad/grad_util.h"

namespace dprun {
namespace {

struct Frame {
  std::string x, dy;              // X and dY in the frame
  std::string scale;              // scale shaped to broadcast against the frame
  std::vector<int64_t> row_axes;  // the axes normalized together
  std::vector<int64_t> sum_axes;  // the axes dscale and dB are summed over
  std::string x_dims;             // X's shape, to reshape dX back ("" when the frame is X)
};

struct Normalized {
  std::string inv, xhat;
};

std::string row_mean(GradientContext& ctx, const Frame& f, const std::string& v) {
  return grad::reduce(ctx, "ReduceMean", v, f.row_axes, true);
}

Normalized normalize(GradientContext& ctx, const Frame& f) {
  DType dt = ctx.dtype_of(ctx.I(0));
  double eps = ctx.node().attr_float("epsilon", 1e-5f);
  std::string centered = ctx.emit("Sub", {f.x, row_mean(ctx, f, f.x)});
  std::string var = row_mean(ctx, f, ctx.emit("Mul", {centered, centered}));
  std::string inv =
      ctx.emit("Reciprocal", {ctx.emit("Sqrt", {ctx.emit("Add", {var, ctx.scalar(eps, dt)})})});
  return {inv, ctx.emit("Mul", {centered, inv})};
}

std::string input_grad(GradientContext& ctx, const Frame& f, const Normalized& n) {
  std::string dxhat = ctx.emit("Mul", {f.dy, f.scale});
  std::string proj = ctx.emit("Mul", {n.xhat, row_mean(ctx, f, ctx.emit("Mul", {dxhat, n.xhat}))});
  std::string centered = ctx.emit("Sub", {ctx.emit("Sub", {dxhat, row_mean(ctx, f, dxhat)}), proj});
  std::string dx = ctx.emit("Mul", {n.inv, centered});
  return f.x_dims.empty() ? dx : ctx.emit("Reshape", {dx, f.x_dims});
}

// The shared rule; `param` sums a frame-shaped gradient into the shape of input 1 or 2.
template <class ParamGrad>
void normalization_grad(GradientContext& ctx, const Frame& f, ParamGrad param) {
  Normalized n = normalize(ctx, f);
  if (ctx.wants_GI(2)) ctx.set_GI(2, param(f.dy, ctx.I(2)));
  if (ctx.wants_GI(1)) ctx.set_GI(1, param(ctx.emit("Mul", {f.dy, n.xhat}), ctx.I(1)));
  if (ctx.wants_GI(0)) ctx.set_GI(0, input_grad(ctx, f, n));
}

// X as [N, C, S] when its rank is unknown or 2 (no spatial axes to normalize over otherwise).
Frame instance_frame(GradientContext& ctx) {
  Frame f;
  std::optional<int64_t> rank = ctx.rank_of(ctx.I(0));
  if (rank && *rank < 2) ctx.fail("X must have rank >= 2 ([N, C, ...]), got ", *rank);
  if (rank && *rank > 2) {
    f.x = ctx.I(0);
    f.dy = ctx.GO(0);
    for (int64_t a = 2; a < *rank; ++a) f.row_axes.push_back(a);
  } else {
    std::string rows = ctx.ints({0, 0, -1});
    f.x = ctx.emit("Reshape", {ctx.I(0), rows});
    f.dy = ctx.emit("Reshape", {ctx.GO(0), rows});
    f.x_dims = ctx.emit("Shape", {ctx.I(0)});
    f.row_axes = {2};
  }
  f.sum_axes = {0};
  f.sum_axes.insert(f.sum_axes.end(), f.row_axes.begin(), f.row_axes.end());
  f.scale = ctx.unsqueeze(ctx.I(1), f.sum_axes);
  return f;
}

void instance_norm_grad(GradientContext& ctx) {
  if (!ctx.has_GO(0)) return;
  if (ctx.onnx_opset() < 7) ctx.fail("needs ai.onnx opset >= 7 (numpy broadcasting)");
  Frame f = instance_frame(ctx);
  normalization_grad(ctx, f, [&](const std::string& g, const std::string&) {
    return ctx.reduce_sum(g, f.sum_axes, false);
  });
}

// X as [N, G, C/G, S]: Reshape to [0, G, -1, S] with S from X as [N, C, S].
Frame group_frame(GradientContext& ctx, int64_t groups) {
  Frame f;
  std::string spatial = ctx.emit("Shape", {ctx.emit("Reshape", {ctx.I(0), ctx.ints({0, 0, -1})})},
                                 {{"start", Attribute::of_int(2)}});
  std::string dims =
      ctx.emit("Concat", {ctx.ints({0, groups, -1}), spatial}, {{"axis", Attribute::of_int(0)}});
  f.x = ctx.emit("Reshape", {ctx.I(0), dims});
  f.dy = ctx.emit("Reshape", {ctx.GO(0), dims});
  f.x_dims = ctx.emit("Shape", {ctx.I(0)});
  f.scale = ctx.emit("Reshape", {ctx.I(1), ctx.ints({1, groups, -1, 1})});
  f.row_axes = {2, 3};
  f.sum_axes = {0, 3};
  return f;
}

// Whether scale and B have one element per group (opset 18's form) rather than per channel;
// nullopt when their size is unknown at build time.
std::optional<bool> per_group(GradientContext& ctx, int64_t groups) {
  auto dims = grad::static_dims(ctx, ctx.I(1));
  if (!dims) return std::nullopt;
  int64_t numel = 1;
  for (int64_t d : *dims) numel *= d;
  return numel == groups;  // with C == groups both forms sum alike
}

void group_norm_grad(GradientContext& ctx) {
  if (!ctx.has_GO(0)) return;
  int64_t groups = ctx.node().attr_int("num_groups", 0);
  if (groups <= 0) ctx.fail("num_groups must be positive, got ", groups);
  Frame f = group_frame(ctx, groups);
  std::optional<bool> grouped = per_group(ctx, groups);
  normalization_grad(ctx, f, [&](const std::string& g, const std::string& p) {
    std::string per_channel = ctx.reduce_sum(g, f.sum_axes, true);  // [1, G, C/G, 1]
    if (!grouped) {  // the run time tells which axes the parameter broadcast over
      std::string p_frame = ctx.emit("Reshape", {p, ctx.ints({1, groups, -1, 1})});
      return ctx.reshape_like(ctx.reduce_to_shape_of(per_channel, std::nullopt, p_frame), p);
    }
    return ctx.reshape_like(*grouped ? ctx.reduce_sum(per_channel, {2}, true) : per_channel, p);
  });
}

DPRUN_REGISTER_GRADIENT({.op_type = "InstanceNormalization",
                         .since = 1,
                         .rule = instance_norm_grad});
DPRUN_REGISTER_GRADIENT({.op_type = "GroupNormalization", .since = 18, .rule = group_norm_grad});

}  // namespace
}  // namespace dprun
