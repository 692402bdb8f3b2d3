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

}  // namespace dprun::grad
