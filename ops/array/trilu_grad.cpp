// Trilu: Y keeps X's elements on one side of the k-th diagonal and zeros the rest, so dX is
// dY masked by the same Trilu (same `upper`, same k).
#include "ops/grad/grad_util.h"

namespace dprun {
namespace {

void trilu_grad(GradientContext& ctx) {
  std::vector<std::string> inputs{ctx.GO(0)};
  if (ctx.input_count() > 1 && !ctx.I(1).empty()) inputs.push_back(ctx.I(1));
  ctx.set_GI(0, ctx.emit("Trilu", inputs,
                         {{"upper", Attribute::of_int(ctx.node().attr_int("upper", 1))}}));
}

DPRUN_REGISTER_GRADIENT({.op_type = "Trilu", .since = 14, .rule = trilu_grad});

}  // namespace
}  // namespace dprun
