// SoftmaxCrossEntropyLoss = NegativeLogLikelihoodLoss(LogSoftmax(scores, axis 1)). The
// gradient of the log-probabilities (from the loss, plus the one reaching the optional
// log_prob output) goes back through LogSoftmax: dScores = g - softmax * sum_c(g).
#include "ops/loss/loss_grad.h"

namespace dprun {
namespace {

// Softmax over the class axis: exp(log_prob) when the node outputs it; Softmax from opset 13
// (a single axis); before, the same spelled out (Softmax then flattened the trailing axes).
std::string class_softmax(GradientContext& ctx) {
  if (ctx.output_count() > 1 && !ctx.O(1).empty()) return ctx.emit("Exp", {ctx.O(1)});
  const std::string& scores = ctx.I(0);
  if (ctx.onnx_opset() >= 13)
    return ctx.emit("Softmax", {scores}, {{"axis", Attribute::of_int(1)}});
  std::string shifted =
      ctx.emit("Sub", {scores, grad::reduce(ctx, "ReduceMax", scores, {1}, true)});
  std::string e = ctx.emit("Exp", {shifted});
  return ctx.emit("Div", {e, grad::reduce(ctx, "ReduceSum", e, {1}, true)});
}

// The loss's gradient alone: dScores = softmax * scale + dlogp, the log-probabilities' gradient
// scattered in at the labels (loss_grad.h): no one-hot of the scores' size and no sums over it.
void softmax_cross_entropy_grad(GradientContext& ctx) {
  if (ctx.has_GO(0) && !ctx.has_GO(1)) {
    const grad::LabelGradient g = grad::label_gradient(ctx);
    const std::string spread = ctx.emit("Mul", {class_softmax(ctx), g.scale});
    ctx.set_GI(0, ctx.emit("Add", {spread, grad::scattered_log_prob_grad(ctx, g)}));
    return;
  }
  // With a gradient reaching the log_prob output: the log-probabilities' whole gradient g,
  // then back through LogSoftmax.
  std::vector<std::string> parts;
  if (ctx.has_GO(0)) parts.push_back(grad::nll_log_prob_grad(ctx));
  if (ctx.has_GO(1)) parts.push_back(ctx.GO(1));
  std::string g = parts.size() == 1 ? parts[0] : ctx.emit("Add", parts);
  std::string total = grad::reduce(ctx, "ReduceSum", g, {1}, true);
  ctx.set_GI(0, ctx.emit("Sub", {g, ctx.emit("Mul", {class_softmax(ctx), total})}));
}

DPRUN_REGISTER_GRADIENT({.op_type = "SoftmaxCrossEntropyLoss",
                         .since = 12,
                         .rule = softmax_cross_entropy_grad});

}  // namespace
}  // namespace dprun
