// Pow: Y = X^E. dX = dY * E * X^(E-1); dE = dY * Y * ln(X) (NaN for X <= 0, as PyTorch).
// Both are summed back over broadcast axes. Before opset 7 E broadcasts onto X only with
// broadcast=1 (Y shaped like X), and so does the 0-d one of E - 1: the emitted nodes that
// combine E with a value shaped like Y pass the node's broadcast on, E second.
#include "ops/grad/grad_util.h"

namespace dprun {
namespace {

void pow_grad(GradientContext& ctx) {
  grad::check_legacy_broadcast(ctx);
  const std::string& x = ctx.I(0);
  DType dx = ctx.dtype_of(x);
  std::string e = ctx.I(1);
  if (ctx.dtype_of(e) != dx) e = ctx.cast(e, dx);  // opset 12 allows an integer exponent
  const auto legacy_e = grad::node_legacy_broadcast(ctx);
  if (ctx.wants_GI(0)) {
    std::string e_minus_1 = ctx.emit("Sub", {e, ctx.scalar(1, dx)}, grad::legacy_broadcast(ctx));
    std::string d = ctx.emit("Mul", {ctx.emit("Pow", {x, e_minus_1}, legacy_e), e}, legacy_e);
    ctx.set_GI(0, ctx.unbroadcast(ctx.emit("Mul", {ctx.GO(0), d}), ctx.O(0), x));
  }
  if (ctx.wants_GI(1)) {
    std::string d = ctx.emit("Mul", {ctx.O(0), ctx.emit("Log", {x})});
    std::string g = ctx.unbroadcast(ctx.emit("Mul", {ctx.GO(0), d}), ctx.O(0), ctx.I(1));
    ctx.set_GI(1, g);
  }
}

DPRUN_REGISTER_GRADIENT({.op_type = "Pow", .since = 1, .rule = pow_grad});

}  // namespace
}  // namespace dprun
