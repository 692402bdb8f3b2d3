// Tile: Y has shape [r0 * d0, r1 * d1, ...]; viewing dY as [r0, d0, r1, d1, ...] and summing
// over the repeat axes gives dX. The repeats get no gradient.
#include "ops/grad/grad_util.h"

namespace dprun {
namespace {

void tile_grad(GradientContext& ctx) {
  const std::string &x = ctx.I(0), &repeats = ctx.I(1);
  int64_t rank = ctx.require_rank(x);
  std::string pairs =
      ctx.emit("Concat", {ctx.unsqueeze(repeats, {1}), ctx.unsqueeze(ctx.emit("Shape", {x}), {1})},
               {{"axis", Attribute::of_int(1)}});
  std::string g = ctx.emit("Reshape", {ctx.GO(0), ctx.emit("Reshape", {pairs, ctx.ints({-1})})});
  std::vector<int64_t> repeat_axes;
  for (int64_t i = 0; i < rank; ++i) repeat_axes.push_back(2 * i);
  ctx.set_GI(0, ctx.reduce_sum(g, repeat_axes, false));
}

DPRUN_REGISTER_GRADIENT({.op_type = "Tile", .since = 6, .rule = tile_grad});

}  // namespace
}  // namespace dprun
