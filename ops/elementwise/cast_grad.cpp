// Cast: the gradient is cast back to the input's type (only between floating types).
#include "ops/grad/grad_util.h"

namespace dprun {
namespace {

void cast_grad(GradientContext& ctx) {
  DType in = ctx.dtype_of(ctx.I(0));
  DType out = static_cast<DType>(ctx.node().attr_int("to"));
  if (!is_floating(in) || !is_floating(out)) return;
  ctx.set_GI(0, ctx.cast(ctx.GO(0), in));
}

DPRUN_REGISTER_GRADIENT({.op_type = "Cast", .since = 6, .rule = cast_grad});

}  // namespace
}  // namespace dprun
