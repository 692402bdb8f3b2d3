// The trigonometric and hyperbolic functions besides Sin and Cos (sin_cos_grad.cpp):
//   Tan:   dX = dY * (1 + Y^2)              Sinh:  dX = dY * cosh(X)
//   Asin:  dX = dY / sqrt(1 - X^2)          Cosh:  dX = dY * sinh(X)
//   Acos:  dX = -dY / sqrt(1 - X^2)         Asinh: dX = dY / sqrt(X^2 + 1)
//   Atan:  dX = dY / (1 + X^2)              Acosh: dX = dY / sqrt(X^2 - 1)
//                                           Atanh: dX = dY / (1 - X^2)
#include "ops/grad/grad_util.h"

namespace dprun {
namespace {

// `a` + `sign` * X^2, with `a` and `sign` constants of X's type.
std::string shifted_square(GradientContext& ctx, double a, double sign) {
  const std::string& x = ctx.I(0);
  DType dt = ctx.dtype_of(x);
  std::string sq = ctx.emit("Mul", {x, x});
  if (sign < 0) return ctx.emit("Sub", {ctx.scalar(a, dt), sq});
  return ctx.emit("Add", {sq, ctx.scalar(a, dt)});
}

void set_quotient(GradientContext& ctx, const std::string& denominator) {
  ctx.set_GI(0, ctx.emit("Div", {ctx.GO(0), denominator}));
}

void set_product(GradientContext& ctx, const std::string& factor) {
  ctx.set_GI(0, ctx.emit("Mul", {ctx.GO(0), factor}));
}

void tan_grad(GradientContext& ctx) {
  const std::string& y = ctx.O(0);
  set_product(ctx, ctx.emit("Add", {ctx.emit("Mul", {y, y}), ctx.scalar(1, ctx.dtype_of(y))}));
}

void asin_grad(GradientContext& ctx) {
  set_quotient(ctx, ctx.emit("Sqrt", {shifted_square(ctx, 1, -1)}));
}

void acos_grad(GradientContext& ctx) {
  std::string neg = ctx.emit("Neg", {ctx.emit("Sqrt", {shifted_square(ctx, 1, -1)})});
  set_quotient(ctx, neg);
}

void atan_grad(GradientContext& ctx) {
  set_quotient(ctx, shifted_square(ctx, 1, 1));
}

void sinh_grad(GradientContext& ctx) {
  set_product(ctx, ctx.emit("Cosh", {ctx.I(0)}));
}

void cosh_grad(GradientContext& ctx) {
  set_product(ctx, ctx.emit("Sinh", {ctx.I(0)}));
}

void asinh_grad(GradientContext& ctx) {
  set_quotient(ctx, ctx.emit("Sqrt", {shifted_square(ctx, 1, 1)}));
}

void acosh_grad(GradientContext& ctx) {
  set_quotient(ctx, ctx.emit("Sqrt", {shifted_square(ctx, -1, 1)}));
}

void atanh_grad(GradientContext& ctx) {
  set_quotient(ctx, shifted_square(ctx, 1, -1));
}

DPRUN_REGISTER_GRADIENT({.op_type = "Tan", .since = 7, .rule = tan_grad});
DPRUN_REGISTER_GRADIENT({.op_type = "Asin", .since = 7, .rule = asin_grad});
DPRUN_REGISTER_GRADIENT({.op_type = "Acos", .since = 7, .rule = acos_grad});
DPRUN_REGISTER_GRADIENT({.op_type = "Atan", .since = 7, .rule = atan_grad});
DPRUN_REGISTER_GRADIENT({.op_type = "Sinh", .since = 9, .rule = sinh_grad});
DPRUN_REGISTER_GRADIENT({.op_type = "Cosh", .since = 9, .rule = cosh_grad});
DPRUN_REGISTER_GRADIENT({.op_type = "Asinh", .since = 9, .rule = asinh_grad});
DPRUN_REGISTER_GRADIENT({.op_type = "Acosh", .since = 9, .rule = acosh_grad});
DPRUN_REGISTER_GRADIENT({.op_type = "Atanh", .since = 9, .rule = atanh_grad});

}  // namespace
}  // namespace dprun
