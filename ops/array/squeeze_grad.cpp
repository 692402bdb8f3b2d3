// Squeeze and Unsqueeze only change the shape: dX = dY reshaped to X's shape.
#include "ops/grad/grad_util.h"

namespace dprun {
namespace {

void squeeze_grad(GradientContext& ctx) {
  ctx.set_GI(0, ctx.reshape_like(ctx.GO(0), ctx.I(0)));
}

DPRUN_REGISTER_GRADIENT({.op_type = "Squeeze", .since = 1, .rule = squeeze_grad});
DPRUN_REGISTER_GRADIENT({.op_type = "Unsqueeze", .since = 1, .rule = squeeze_grad});

}  // namespace
}  // namespace dprun
