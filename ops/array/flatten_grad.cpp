// Flatten: dX = dY reshaped to X's shape.
#include "ops/grad/grad_util.h"

namespace dprun {
namespace {

void flatten_grad(GradientContext& ctx) {
  ctx.set_GI(0, ctx.reshape_like(ctx.GO(0), ctx.I(0)));
}

DPRUN_REGISTER_GRADIENT({.op_type = "Flatten", .since = 1, .rule = flatten_grad});

}  // namespace
}  // namespace dprun
