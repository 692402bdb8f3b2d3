// NegativeLogLikelihoodLoss: the gradient reaches the log-probabilities (input 0) only; the
// labels are integers and the weights are treated as constants (see loss_grad.h).
#include "ops/loss/loss_grad.h"

namespace dprun {
namespace {

void nll_loss_grad(GradientContext& ctx) {
  ctx.set_GI(0, grad::scattered_log_prob_grad(ctx, grad::label_gradient(ctx)));
}

DPRUN_REGISTER_GRADIENT({.op_type = "NegativeLogLikelihoodLoss",
                         .since = 12,
                         .rule = nll_loss_grad});

}  // namespace
}  // namespace dprun
