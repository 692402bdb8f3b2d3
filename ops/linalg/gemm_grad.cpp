// Gemm: Y = alpha * A' @ B' + beta * C with A' = transA ? A^T : A (B' likewise).
// dA' = alpha * dY @ B'^T, dB' = alpha * A'^T @ dY, dC = beta * dY summed over broadcast axes.
// The operands are matrices: each transpose names its perm, so a backend can fold it into the
// product that reads it whatever it knows of the shapes (engine/rewrites/op_fusion.h).
#include "ops/grad/grad_util.h"

namespace dprun {
namespace {

void gemm_grad(GradientContext& ctx) {
  const Node& node = ctx.node();
  bool trans_a = node.attr_int("transA", 0) != 0, trans_b = node.attr_int("transB", 0) != 0;
  float alpha = node.attr_float("alpha", 1.0f), beta = node.attr_float("beta", 1.0f);
  const std::string &a = ctx.I(0), &b = ctx.I(1), &go = ctx.GO(0);
  auto t = [&](const std::string& x) {
    return ctx.emit("Transpose", {x}, {{"perm", Attribute::of_ints({1, 0})}});
  };
  auto scale = [&](const std::string& x, float s) {
    return s == 1.0f ? x : ctx.emit("Mul", {x, ctx.scalar(s, ctx.dtype_of(a))});
  };
  if (ctx.wants_GI(0)) {
    std::string da = trans_a ? ctx.emit("MatMul", {trans_b ? t(b) : b, t(go)})
                             : ctx.emit("MatMul", {go, trans_b ? b : t(b)});
    ctx.set_GI(0, scale(da, alpha));
  }
  if (ctx.wants_GI(1)) {
    std::string db = trans_b ? ctx.emit("MatMul", {t(go), trans_a ? t(a) : a})
                             : ctx.emit("MatMul", {trans_a ? a : t(a), go});
    ctx.set_GI(1, scale(db, alpha));
  }
  if (ctx.input_count() > 2 && ctx.wants_GI(2)) {
    std::string dc = scale(go, beta);
    ctx.set_GI(2, ctx.unbroadcast(dc, ctx.O(0), ctx.I(2)));
  }
}

DPRUN_REGISTER_GRADIENT({.op_type = "Gemm", .since = 1, .rule = gemm_grad});

}  // namespace
}  // namespace dprun
