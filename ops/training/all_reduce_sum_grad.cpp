// AllReduceSum (rewrite domain; engine/autograd/sync_batch_norm.h): every replica's output is
// the sum of every replica's input, so the gradient of replica r's input sums the gradients of
// every replica's output: dX = AllReduceSum(dY), added in replica order as the forward.
#include "engine/rewrites/rewrite_domain.h"
#include "ops/grad/grad_util.h"

namespace dprun {
namespace {

void all_reduce_sum_grad(GradientContext& ctx) {
  ctx.set_GI(0, ctx.emit_in(kRewriteDomain, "AllReduceSum", {ctx.GO(0)}));
}

DPRUN_REGISTER_GRADIENT(
    {.domain = kRewriteDomain, .op_type = "AllReduceSum", .since = 1, .rule = all_reduce_sum_grad});

}  // namespace
}  // namespace dprun
