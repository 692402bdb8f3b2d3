// Reshape: dX = dY reshaped to X's shape. The shape input has no gradient.
#include "ops/grad/grad_util.h"

namespace dprun {
namespace {

void reshape_grad(GradientContext& ctx) {
  ctx.set_GI(0, ctx.reshape_like(ctx.GO(0), ctx.I(0)));
}

DPRUN_REGISTER_GRADIENT({.op_type = "Reshape", .since = 1, .rule = reshape_grad});

}  // namespace
}  // namespace dprun
