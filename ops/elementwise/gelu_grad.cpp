// Gelu's gradient, dX = dY * GELU'(x):
// - the erf form (the rewrite domain's Gelu, which the gradient builder differentiates the
//   exported chain as, and Gelu-20 without approximation): GELU'(x) = Phi(x) + x phi(x), with
//   Phi(x) = (1 + erf(x / sqrt 2)) / 2 and phi(x) = exp(-x^2 / 2) / sqrt(2 pi). Emitted in the
//   shape engine/rewrites/gelu_fusion.h fuses into one GeluGrad node;
// - the tanh form (Gelu-20 with approximate "tanh"), y = x (1 + tanh(u)) / 2 with
//   u = k (x + a x^3), k = sqrt(2 / pi), a = 0.044715:
//   GELU'(x) = (1 + t) / 2 + (x / 2) (1 - t^2) k (1 + 3 a x^2), t = tanh(u).
#include "engine/rewrites/rewrite_domain.h"
#include "ops/grad/grad_util.h"

namespace dprun {
namespace {

std::string erf_form_derivative(GradientContext& ctx, const std::string& x, DType dt) {
  const std::string scaled = ctx.emit("Mul", {x, ctx.scalar(0.7071067811865476, dt)});
  const std::string one_plus = ctx.emit("Add", {ctx.emit("Erf", {scaled}), ctx.scalar(1, dt)});
  const std::string cdf = ctx.emit("Mul", {one_plus, ctx.scalar(0.5, dt)});
  const std::string squared = ctx.emit("Mul", {x, x});
  const std::string exponent = ctx.emit("Mul", {squared, ctx.scalar(-0.5, dt)});
  const std::string pdf =
      ctx.emit("Mul", {ctx.emit("Exp", {exponent}), ctx.scalar(0.3989422804014327, dt)});
  return ctx.emit("Add", {cdf, ctx.emit("Mul", {x, pdf})});
}

std::string tanh_form_derivative(GradientContext& ctx, const std::string& x, DType dt) {
  const double k = 0.7978845608028654, a = 0.044715;
  const std::string squared = ctx.emit("Mul", {x, x});
  const std::string inner =
      ctx.emit("Add", {ctx.emit("Mul", {squared, ctx.scalar(a, dt)}), ctx.scalar(1, dt)});
  const std::string t =
      ctx.emit("Tanh", {ctx.emit("Mul", {ctx.emit("Mul", {x, inner}), ctx.scalar(k, dt)})});
  const std::string left =
      ctx.emit("Mul", {ctx.emit("Add", {t, ctx.scalar(1, dt)}), ctx.scalar(0.5, dt)});
  const std::string slope = ctx.emit(
      "Mul",
      {ctx.emit("Add", {ctx.emit("Mul", {squared, ctx.scalar(3 * a, dt)}), ctx.scalar(1, dt)}),
       ctx.scalar(k, dt)});
  const std::string sech2 = ctx.emit("Sub", {ctx.scalar(1, dt), ctx.emit("Mul", {t, t})});
  const std::string half_x = ctx.emit("Mul", {x, ctx.scalar(0.5, dt)});
  const std::string right = ctx.emit("Mul", {ctx.emit("Mul", {half_x, sech2}), slope});
  return ctx.emit("Add", {left, right});
}

void gelu_grad(GradientContext& ctx) {
  const std::string& x = ctx.I(0);
  const DType dt = ctx.dtype_of(x);
  const std::string approximate = ctx.node().attr_string("approximate", "none");
  if (approximate != "none" && approximate != "tanh")
    ctx.fail("approximate '", approximate, "' is neither 'none' nor 'tanh'");
  const std::string derivative =
      approximate == "tanh" ? tanh_form_derivative(ctx, x, dt) : erf_form_derivative(ctx, x, dt);
  ctx.set_GI(0, ctx.emit("Mul", {ctx.GO(0), derivative}));
}

DPRUN_REGISTER_GRADIENT({.domain = kRewriteDomain, .op_type = "Gelu", .rule = gelu_grad});
DPRUN_REGISTER_GRADIENT({.op_type = "Gelu", .since = 20, .rule = gelu_grad});

}  // namespace
}  // namespace dprun
