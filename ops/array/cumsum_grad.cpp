// CumSum: each X_i reaches every Y_j whose running sum includes it, the j at or after i
// (before i when reversed; exclusive leaves j = i out). So dX is the CumSum of dY along the same
// axis in the other direction, with the same `exclusive`.
#include "ops/grad/grad_util.h"

namespace dprun {
namespace {

void cumsum_grad(GradientContext& ctx) {
  const Node& node = ctx.node();
  int64_t reverse = node.attr_int("reverse", 0) != 0 ? 0 : 1;
  ctx.set_GI(0, ctx.emit("CumSum", {ctx.GO(0), ctx.I(1)},
                         {{"exclusive", Attribute::of_int(node.attr_int("exclusive", 0))},
                          {"reverse", Attribute::of_int(reverse)}}));
}

DPRUN_REGISTER_GRADIENT({.op_type = "CumSum", .since = 11, .rule = cumsum_grad});

}  // namespace
}  // namespace dprun
