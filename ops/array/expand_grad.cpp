// Expand: dX = dY summed over the axes X was broadcast along. The shape gets none.
#include "ops/grad/grad_util.h"

namespace dprun {
namespace {

void expand_grad(GradientContext& ctx) {
  ctx.set_GI(0, ctx.unbroadcast(ctx.GO(0), ctx.O(0), ctx.I(0)));
}

DPRUN_REGISTER_GRADIENT({.op_type = "Expand", .since = 8, .rule = expand_grad});

}  // namespace
}  // namespace dprun
