// BatchNormalization over channel axis 1 of X [N, C, D1, ...], as ops/normalization/batch_norm.cpp
// runs it. With xhat = (X - mean) / sqrt(var + epsilon) and the sums over every axis but the
// channel's:
//
// Inference form: Y = xhat * scale + B with the given mean and var, so
//   dX = dY * scale / sqrt(var + eps), dscale = sum(dY * xhat), dB = sum(dY),
//   dmean = -scale / sqrt(var + eps) * dB, dvar = -scale / (2 (var + eps)) * dscale.
// Training form (training_mode=1 from opset 14; before, a node with more than one output): the
// batch statistics are recomputed from X with ReduceMean (population variance, as the
// forward), and, M being the number of elements behind each channel,
//   dX = scale / sqrt(var_b + eps) * (dY - (sum(dY) + xhat * sum(dY * xhat)) / M),
// dscale and dB as above. input_mean and input_var only feed the running statistics, which are
// state like PyTorch's buffers: gradients reaching the running outputs are not propagated.
// Before opset 9, spatial=0 gives per-activation parameters and the sums run over N only.
#include <climits>

#include "ops/grad/grad_util.h"

namespace dprun {
namespace {

struct BatchNormForm {
  bool training = false;
  bool per_activation = false;
  int64_t rank = 0;
  std::vector<int64_t> axes;  // the reduced axes of X
};

BatchNormForm form_of(GradientContext& ctx) {
  const Node& node = ctx.node();
  BatchNormForm f;
  if (ctx.opset() >= 14) {
    f.training = node.attr_int("training_mode", 0) != 0;
  } else {
    size_t named = 0;
    for (const auto& o : node.outputs) named += o.empty() ? 0 : 1;
    f.training = named > 1;
  }
  f.per_activation = ctx.opset() < 9 && node.attr_int("spatial", 1) == 0;
  f.rank = ctx.require_rank(ctx.I(0));
  if (f.rank < 2) ctx.fail("X must have rank >= 2, got ", f.rank);
  f.axes.push_back(0);
  if (!f.per_activation)
    for (int64_t a = 2; a < f.rank; ++a) f.axes.push_back(a);
  return f;
}

// A parameter in X's element type.
std::string as_x_type(GradientContext& ctx, const std::string& p) {
  DType dt = ctx.dtype_of(ctx.I(0));
  return ctx.dtype_of(p) == dt ? p : ctx.cast(p, dt);
}

// A gradient computed in X's element type, in the type of parameter `p`.
std::string as_param_type(GradientContext& ctx, const std::string& g, const std::string& p) {
  DType dt = ctx.dtype_of(p);
  return ctx.dtype_of(ctx.I(0)) == dt ? g : ctx.cast(g, dt);
}

// A per-channel value ([C], or [C, D1, ...] per activation) shaped to broadcast against X.
std::string broadcast_param(GradientContext& ctx, const BatchNormForm& f, const std::string& p) {
  if (!f.per_activation) {
    std::vector<int64_t> axes = {0};
    for (int64_t a = 2; a < f.rank; ++a) axes.push_back(a);
    return ctx.unsqueeze(p, axes);
  }
  // [1, C, D1, ...] from X's shape: per-activation parameters may also come flat ([C * D1...]).
  std::string tail = ctx.emit("Slice", {ctx.emit("Shape", {ctx.I(0)})},
                              {{"starts", Attribute::of_ints({1})},
                               {"ends", Attribute::of_ints({INT64_MAX})},
                               {"axes", Attribute::of_ints({0})}});
  return ctx.emit("Reshape",
                  {p, ctx.emit("Concat", {ctx.ints({1}), tail}, {{"axis", Attribute::of_int(0)}})});
}

// Sums `g` (shaped like X) over the reduced axes into the shape of parameter `p`.
std::string sum_to_param(GradientContext& ctx, const BatchNormForm& f, const std::string& g,
                         const std::string& p) {
  std::string r = ctx.reduce_sum(g, f.axes, false);
  return f.per_activation ? ctx.reshape_like(r, p) : r;
}

// ReduceMean over `axes`, keeping them (axes an attribute before opset 18, an input after).
std::string reduce_mean(GradientContext& ctx, const std::string& x,
                        const std::vector<int64_t>& axes) {
  if (ctx.onnx_opset() < 18)
    return ctx.emit("ReduceMean", {x},
                    {{"axes", Attribute::of_ints(axes)}, {"keepdims", Attribute::of_int(1)}});
  return ctx.emit("ReduceMean", {x, ctx.ints(axes)}, {{"keepdims", Attribute::of_int(1)}});
}

// 1 / sqrt(var + epsilon).
std::string inv_std(GradientContext& ctx, const std::string& var) {
  DType dt = ctx.dtype_of(ctx.I(0));
  double eps = ctx.node().attr_float("epsilon", 1e-5f);
  return ctx.emit("Reciprocal", {ctx.emit("Sqrt", {ctx.emit("Add", {var, ctx.scalar(eps, dt)})})});
}

void inference_grad(GradientContext& ctx, const BatchNormForm& f) {
  const std::string& go = ctx.GO(0);
  std::string inv = inv_std(ctx, as_x_type(ctx, ctx.I(4)));
  std::string a = ctx.emit("Mul", {as_x_type(ctx, ctx.I(1)), inv});  // scale / sqrt(var + eps)
  if (ctx.wants_GI(0)) ctx.set_GI(0, ctx.emit("Mul", {go, broadcast_param(ctx, f, a)}));
  if (ctx.wants_GI(2) || ctx.wants_GI(3)) {
    std::string db = sum_to_param(ctx, f, go, ctx.I(2));
    ctx.set_GI(2, as_param_type(ctx, db, ctx.I(2)));
    if (ctx.wants_GI(3))
      ctx.set_GI(3, as_param_type(ctx, ctx.emit("Neg", {ctx.emit("Mul", {a, db})}), ctx.I(3)));
  }
  if (ctx.wants_GI(1) || ctx.wants_GI(4)) {
    std::string centered =
        ctx.emit("Sub", {ctx.I(0), broadcast_param(ctx, f, as_x_type(ctx, ctx.I(3)))});
    std::string xhat = ctx.emit("Mul", {centered, broadcast_param(ctx, f, inv)});
    std::string ds = sum_to_param(ctx, f, ctx.emit("Mul", {go, xhat}), ctx.I(1));
    ctx.set_GI(1, as_param_type(ctx, ds, ctx.I(1)));
    if (ctx.wants_GI(4)) {
      std::string half = ctx.scalar(-0.5, ctx.dtype_of(ctx.I(0)));
      std::string dvar = ctx.emit("Mul", {ctx.emit("Mul", {a, inv}), ctx.emit("Mul", {ds, half})});
      ctx.set_GI(4, as_param_type(ctx, dvar, ctx.I(4)));
    }
  }
}

void training_grad(GradientContext& ctx, const BatchNormForm& f) {
  const std::string& x = ctx.I(0);
  const std::string& go = ctx.GO(0);
  DType dt = ctx.dtype_of(x);
  std::string centered = ctx.emit("Sub", {x, reduce_mean(ctx, x, f.axes)});
  std::string var = reduce_mean(ctx, ctx.emit("Mul", {centered, centered}), f.axes);
  std::string inv = inv_std(ctx, var);
  std::string xhat = ctx.emit("Mul", {centered, inv});
  std::string sum_g = ctx.reduce_sum(go, f.axes, true);
  std::string sum_gx = ctx.reduce_sum(ctx.emit("Mul", {go, xhat}), f.axes, true);
  if (ctx.wants_GI(1))
    ctx.set_GI(1, as_param_type(ctx, ctx.reshape_like(sum_gx, ctx.I(1)), ctx.I(1)));
  if (ctx.wants_GI(2))
    ctx.set_GI(2, as_param_type(ctx, ctx.reshape_like(sum_g, ctx.I(2)), ctx.I(2)));
  if (!ctx.wants_GI(0)) return;
  std::string count =
      ctx.cast(ctx.emit("Div", {ctx.emit("Size", {x}), ctx.emit("Size", {ctx.I(1)})}), dt);
  std::string mean_part =
      ctx.emit("Div", {ctx.emit("Add", {sum_g, ctx.emit("Mul", {xhat, sum_gx})}), count});
  std::string a = ctx.emit("Mul", {broadcast_param(ctx, f, as_x_type(ctx, ctx.I(1))), inv});
  ctx.set_GI(0, ctx.emit("Mul", {a, ctx.emit("Sub", {go, mean_part})}));
}

void batch_norm_grad(GradientContext& ctx) {
  if (ctx.has_GO(3) || ctx.has_GO(4))
    ctx.fail("gradients through the saved batch statistics (outputs 3 and 4) are not supported");
  if (!ctx.has_GO(0)) return;  // only the running statistics are used: they are state
  BatchNormForm f = form_of(ctx);
  if (f.training)
    training_grad(ctx, f);
  else
    inference_grad(ctx, f);
}

DPRUN_REGISTER_GRADIENT({.op_type = "BatchNormalization", .since = 1, .rule = batch_norm_grad});

}  // namespace
}  // namespace dprun
