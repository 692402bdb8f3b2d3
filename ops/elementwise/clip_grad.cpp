// Clip: Y = min(max(X, lo), hi). dX = dY where lo < X < hi, else 0: the open interval of
// PyTorch's hardtanh (ReLU6 exports as Clip(0, 6)); torch.clamp passes the bounds themselves
// too, a difference only at X exactly on a bound.
// The bounds are attributes before opset 11 and optional scalar inputs after. Bounds given as
// inputs that depend on the differentiated values get d lo = sum(dY where X < lo <= hi) and
// d hi = sum(dY where max(X, lo) > hi); constant bounds get nothing.
#include "ops/grad/grad_util.h"

namespace dprun {
namespace {

struct ClipBounds {
  std::string lo, hi;  // values of X's type; "" when absent
};

ClipBounds bounds_of(GradientContext& ctx) {
  ClipBounds b;
  if (ctx.opset() >= 11) {
    if (ctx.input_count() > 1) b.lo = ctx.I(1);
    if (ctx.input_count() > 2) b.hi = ctx.I(2);
    return b;
  }
  DType dt = ctx.dtype_of(ctx.I(0));
  const Node& node = ctx.node();
  if (node.has_attr("min")) b.lo = ctx.scalar(node.attr_float("min"), dt);
  if (node.has_attr("max")) b.hi = ctx.scalar(node.attr_float("max"), dt);
  return b;
}

// The mask `cond` as 0/1 of X's type.
std::string as_x_type(GradientContext& ctx, const std::string& cond) {
  return ctx.cast(cond, ctx.dtype_of(ctx.I(0)));
}

void input_grad(GradientContext& ctx, const ClipBounds& b) {
  const std::string& x = ctx.I(0);
  std::string inside;
  if (!b.lo.empty()) inside = ctx.emit("Greater", {x, b.lo});
  if (!b.hi.empty()) {
    std::string below = ctx.emit("Less", {x, b.hi});
    inside = inside.empty() ? below : ctx.emit("And", {inside, below});
  }
  if (inside.empty()) {  // no bounds: the identity
    ctx.set_GI(0, ctx.emit("Identity", {ctx.GO(0)}));
    return;
  }
  ctx.set_GI(0, ctx.emit("Mul", {ctx.GO(0), as_x_type(ctx, inside)}));
}

// The sum of dY where `cond` holds, shaped like the bound `bound`.
std::string bound_grad(GradientContext& ctx, const std::string& cond, const std::string& bound) {
  std::string g = grad::sum_all(ctx, ctx.emit("Mul", {ctx.GO(0), as_x_type(ctx, cond)}));
  return ctx.reshape_like(g, bound);
}

void clip_grad(GradientContext& ctx) {
  // The masks compare X with scalar bounds, which ops before opset 7 do not broadcast.
  if (ctx.onnx_opset() < 7) ctx.fail("needs ai.onnx opset >= 7 (numpy broadcasting)");
  ClipBounds b = bounds_of(ctx);
  if (ctx.wants_GI(0)) input_grad(ctx, b);
  if (ctx.opset() < 11) return;  // attribute bounds are constants
  const std::string& x = ctx.I(0);
  if (!b.lo.empty() && ctx.wants_GI(1)) {
    std::string cond = ctx.emit("Less", {x, b.lo});
    if (!b.hi.empty())  // lo > hi clips everything to hi
      cond = ctx.emit("And", {cond, ctx.emit("Not", {ctx.emit("Greater", {b.lo, b.hi})})});
    ctx.set_GI(1, bound_grad(ctx, cond, b.lo));
  }
  if (!b.hi.empty() && ctx.wants_GI(2)) {
    std::string cond = ctx.emit("Greater", {x, b.hi});
    if (!b.lo.empty()) cond = ctx.emit("Or", {cond, ctx.emit("Greater", {b.lo, b.hi})});
    ctx.set_GI(2, bound_grad(ctx, cond, b.hi));
  }
}

DPRUN_REGISTER_GRADIENT({.op_type = "Clip", .since = 1, .rule = clip_grad});

}  // namespace
}  // namespace dprun
