// Dropout. In inference (every opset before 12, as the forward kernel runs it, and 12+ without a
// true training_mode) Y = X and dX = dY. In training mode Y = X * mask / (1 - ratio), so
// dX = dY * mask / (1 - ratio) with the node's own mask output: the rule cannot draw the same
// mask again, so a training-mode Dropout without a mask output is an error. A training_mode fed
// at run time is folded in as dX = dY * mask / (1 - ratio * training_mode) (in inference the
// mask is all ones). A constant ratio of 0 keeps every element (as exporters write Dropout(p=0.0)
// in training mode): dX = dY then too.
#include "ops/grad/grad_util.h"

namespace dprun {
namespace {

// False when the node is known to pass X through: in inference, or dropping nothing.
bool may_drop(GradientContext& ctx) {
  if (ctx.opset() < 12 || ctx.input_count() < 3 || ctx.I(2).empty()) return false;
  auto training = ctx.constant_value(ctx.I(2));
  if (training && training->item_as_double() == 0.0) return false;
  auto ratio =
      ctx.input_count() > 1 && !ctx.I(1).empty() ? ctx.constant_value(ctx.I(1)) : std::nullopt;
  return !ratio || ratio->numel() != 1 || ratio->item_as_double() != 0.0;
}

// The ratio in X's element type (an optional input from opset 12, 0.5 by default).
std::string ratio_of(GradientContext& ctx) {
  DType dt = ctx.dtype_of(ctx.I(0));
  if (ctx.input_count() < 2 || ctx.I(1).empty()) return ctx.scalar(0.5, dt);
  const std::string& r = ctx.I(1);
  return ctx.dtype_of(r) == dt ? r : ctx.cast(r, dt);
}

void dropout_grad(GradientContext& ctx) {
  if (!may_drop(ctx)) {
    ctx.set_GI(0, ctx.emit("Identity", {ctx.GO(0)}));
    return;
  }
  if (ctx.output_count() < 2 || ctx.O(1).empty())
    ctx.fail("a training-mode Dropout needs its mask output (output 1) for the gradient");
  DType dt = ctx.dtype_of(ctx.I(0));
  std::string training = ctx.cast(ctx.I(2), dt);
  std::string kept =
      ctx.emit("Sub", {ctx.scalar(1, dt), ctx.emit("Mul", {ratio_of(ctx), training})});
  std::string masked = ctx.emit("Mul", {ctx.GO(0), ctx.cast(ctx.O(1), dt)});
  ctx.set_GI(0, ctx.emit("Div", {masked, kept}));
}

DPRUN_REGISTER_GRADIENT({.op_type = "Dropout", .since = 1, .rule = dropout_grad});

}  // namespace
}  // namespace dprun
