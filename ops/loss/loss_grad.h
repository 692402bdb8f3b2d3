#pragma once
// The part of the NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss gradients they share:
// the gradient of the loss with respect to the log-probabilities.
//
// With w[n, d] = weight[label[n, d]] (1 without weights) and 0 where label == ignore_index,
// loss[n, d] = -w[n, d] * logp[n, label[n, d], d], so
//   dlogp[n, c, d] = -coef[n, d] * w[n, d] * (c == label[n, d]),
// coef = dLoss (reduction none), dLoss broadcast (sum) or dLoss / sum(w) (mean). The one-hot
// is an Equal against Range(C), so an ignore_index outside [0, C) never indexes anything.
// Weights get no gradient: they are treated as constants, as PyTorch treats them.
#include "ops/grad/grad_util.h"

namespace dprun::grad {

// `v` of shape [C] laid out as a class column [C, 1, ..., 1] that broadcasts against the
// scores [N, C, d1, ...]: Unsqueeze when the scores' rank is known, else a Reshape to a shape
// built at run time.
inline std::string class_column(GradientContext& ctx, const std::string& v) {
  const std::string& scores = ctx.I(0);
  if (auto rank = ctx.rank_of(scores)) {
    std::vector<int64_t> trailing;  // the axes after the class axis
    for (int64_t a = 1; a + 1 < *rank; ++a) trailing.push_back(a);
    return ctx.unsqueeze(v, trailing);
  }
  std::string dims = ctx.emit("Shape", {scores});
  std::string extra = ctx.emit("Sub", {ctx.emit("Size", {dims}), ctx.scalar(2, DType::Int64)});
  Tensor one = Tensor::from_vector<int64_t>({1}, {1});
  std::string ones = ctx.emit("ConstantOfShape", {ctx.emit("Reshape", {extra, ctx.ints({1})})},
                              {{"value", Attribute::of_tensor(one)}});
  std::string column = ctx.emit("Concat", {ctx.ints({-1}), ones}, {{"axis", Attribute::of_int(0)}});
  return ctx.emit("Reshape", {v, column});
}

// w[n, d] * (c == label[n, d]) laid out like the scores [N, C, d1, ...].
inline std::string weighted_onehot(GradientContext& ctx) {
  const std::string &scores = ctx.I(0), &labels = ctx.I(1);
  std::string label = labels;
  if (ctx.dtype_of(labels) != DType::Int64) label = ctx.cast(label, DType::Int64);
  label = ctx.unsqueeze(label, {1});  // [N, 1, d1, ...]
  std::string classes =
      ctx.emit("Gather", {ctx.emit("Shape", {scores}), ctx.scalar(1, DType::Int64)});
  std::string range =
      ctx.emit("Range", {ctx.scalar(0, DType::Int64), classes, ctx.scalar(1, DType::Int64)});
  std::string hit = ctx.emit("Equal", {label, class_column(ctx, range)});
  if (ctx.node().has_attr("ignore_index")) {
    std::string ignored =
        ctx.constant(Tensor::scalar<int64_t>(ctx.node().attr_int("ignore_index")));
    hit = ctx.emit("And", {hit, ctx.emit("Not", {ctx.emit("Equal", {label, ignored})})});
  }
  std::string onehot = ctx.cast(hit, ctx.dtype_of(scores));
  if (ctx.input_count() > 2 && !ctx.I(2).empty())
    onehot = ctx.emit("Mul", {onehot, class_column(ctx, ctx.I(2))});
  return onehot;
}

/// dLoss/dlogp for the node's first output's gradient GO(0).
inline std::string nll_log_prob_grad(GradientContext& ctx) {
  std::string onehot = weighted_onehot(ctx);
  std::string reduction = ctx.node().attr_string("reduction", "mean");
  std::string coef = ctx.GO(0);
  if (reduction == "none")
    coef = ctx.unsqueeze(coef, {1});
  else if (reduction == "mean")
    coef = ctx.emit("Div", {coef, grad::reduce(ctx, "ReduceSum", onehot, {}, false)});
  else if (reduction != "sum")
    ctx.fail("unknown reduction '", reduction, "'");
  return ctx.emit("Neg", {ctx.emit("Mul", {onehot, coef})});
}

// Where each position's loss reads its log-probability, and that position's share of the
// loss's gradient: `index` [N, 1, d1, ...] holds the labels as class indices (an ignored label
// replaced by class 0), `scale` (shaped like `index`) holds coef * w, 0 where the label is
// ignored, so that dlogp is -scale at `index` and 0 elsewhere. Built from the labels alone, with
// no tensor of the scores' size.
struct LabelGradient {
  std::string index, scale;
};

inline LabelGradient label_gradient(GradientContext& ctx) {
  const DType dt = ctx.dtype_of(ctx.I(0));
  std::string label = ctx.I(1);
  if (ctx.dtype_of(label) != DType::Int64) label = ctx.cast(label, DType::Int64);
  label = ctx.unsqueeze(label, {1});
  LabelGradient g{label, {}};
  std::string w;  // the positions' weights; empty where every one is 1
  if (ctx.node().has_attr("ignore_index")) {
    const std::string ignored = ctx.emit(
        "Equal",
        {label, ctx.constant(Tensor::scalar<int64_t>(ctx.node().attr_int("ignore_index")))});
    g.index = ctx.emit("Where", {ignored, ctx.scalar(0, DType::Int64), label});
    w = ctx.cast(ctx.emit("Not", {ignored}), dt);
  }
  if (ctx.input_count() > 2 && !ctx.I(2).empty()) {
    const std::string picked = ctx.emit("Gather", {ctx.I(2), g.index});
    w = w.empty() ? picked : ctx.emit("Mul", {w, picked});
  }
  const std::string reduction = ctx.node().attr_string("reduction", "mean");
  std::string coef = ctx.GO(0);
  if (reduction == "none") {
    coef = ctx.unsqueeze(coef, {1});
  } else if (reduction == "mean") {
    const std::string total = w.empty() ? ctx.cast(ctx.emit("Size", {label}), dt)
                                        : grad::reduce(ctx, "ReduceSum", w, {}, false);
    coef = ctx.emit("Div", {coef, total});
  } else if (reduction != "sum") {
    ctx.fail("unknown reduction '", reduction, "'");
  }
  if (!w.empty())
    g.scale = ctx.emit("Mul", {coef, w});
  else
    g.scale = reduction == "none" ? coef : ctx.emit("Expand", {coef, ctx.emit("Shape", {label})});
  return g;
}

/// dlogp as label_gradient gives it: zeros of the scores' shape with -scale scattered in at
/// each position's label (one write of the scores' size and the scatter).
inline std::string scattered_log_prob_grad(GradientContext& ctx, const LabelGradient& g) {
  const Tensor zero = scalar_tensor(0, ctx.dtype_of(ctx.I(0))).reshape({1});
  const std::string zeros = ctx.emit("ConstantOfShape", {ctx.emit("Shape", {ctx.I(0)})},
                                     {{"value", Attribute::of_tensor(zero)}});
  return ctx.emit("ScatterElements", {zeros, g.index, ctx.emit("Neg", {g.scale})},
                  {{"axis", Attribute::of_int(1)}});
}

}  // namespace dprun::grad
