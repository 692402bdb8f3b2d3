// Max and Min (variadic, broadcasting): dY goes to the inputs equal to the result, split evenly
// between tied inputs (as PyTorch's maximum/minimum do for two), then is summed back over
// broadcast axes. "Equal to the result" is tested as not below it (Max) or not above it (Min),
// which needs only Less/Greater on floats.
#include "ops/grad/grad_util.h"

namespace dprun {
namespace {

void extremum_grad(GradientContext& ctx, const char* beaten_by) {
  const std::string& y = ctx.O(0);
  DType dt = ctx.dtype_of(y);
  std::vector<std::string> hits;
  for (size_t i = 0; i < ctx.input_count(); ++i)
    hits.push_back(ctx.cast(ctx.emit("Not", {ctx.emit(beaten_by, {ctx.I(i), y})}), dt));
  std::string share = ctx.GO(0);
  if (hits.size() > 1) share = ctx.emit("Div", {share, ctx.emit("Sum", hits)});
  for (size_t i = 0; i < ctx.input_count(); ++i)
    if (ctx.wants_GI(i))
      ctx.set_GI(i, ctx.unbroadcast(ctx.emit("Mul", {share, hits[i]}), y, ctx.I(i)));
}

void max_grad(GradientContext& ctx) {
  extremum_grad(ctx, "Less");
}
void min_grad(GradientContext& ctx) {
  extremum_grad(ctx, "Greater");
}

DPRUN_REGISTER_GRADIENT({.op_type = "Max", .since = 6, .rule = max_grad});
DPRUN_REGISTER_GRADIENT({.op_type = "Min", .since = 6, .rule = min_grad});

}  // namespace
}  // namespace dprun
