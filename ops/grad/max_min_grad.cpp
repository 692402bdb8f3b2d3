// Max and Min (elementwise, variadic, broadcasting): dY goes to the inputs equal to Y, split
// equally between ties (PyTorch's torch.maximum / torch.minimum give each of two tied inputs
// half), then summed back over each input's broadcast axes. X == Y is written as !(X < Y) for
// Max and !(X > Y) for Min: Equal takes floats only from opset 11.
#include "ops/grad/grad_util.h"

namespace dprun {
namespace {

void extremum_grad(GradientContext& ctx, const char* beaten_by) {
  const std::string& y = ctx.O(0);
  if (ctx.input_count() == 1) {
    ctx.set_GI(0, ctx.emit("Identity", {ctx.GO(0)}));
    return;
  }
  DType dt = ctx.dtype_of(y);
  std::vector<std::string> masks;
  std::string ties;
  for (size_t i = 0; i < ctx.input_count(); ++i) {
    std::string is_y = ctx.emit("Not", {ctx.emit(beaten_by, {ctx.I(i), y})});
    masks.push_back(ctx.cast(is_y, dt));
    // Add broadcasts at every opset from 7; Sum only from 8.
    ties = ties.empty() ? masks.back() : ctx.emit("Add", {ties, masks.back()});
  }
  std::string share = ctx.emit("Div", {ctx.GO(0), ties});
  for (size_t i = 0; i < ctx.input_count(); ++i)
    if (ctx.wants_GI(i))
      ctx.set_GI(i, ctx.unbroadcast(ctx.emit("Mul", {share, masks[i]}), y, ctx.I(i)));
}

void max_grad(GradientContext& ctx) {
  extremum_grad(ctx, "Less");
}
void min_grad(GradientContext& ctx) {
  extremum_grad(ctx, "Greater");
}

DPRUN_REGISTER_GRADIENT({.op_type = "Max", .since = 1, .rule = max_grad});
DPRUN_REGISTER_GRADIENT({.op_type = "Min", .since = 1, .rule = min_grad});

}  // namespace
}  // namespace dprun
