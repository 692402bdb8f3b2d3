// GeluGrad (rewrite domain): dY * (Phi(x) + x phi(x)), the gradient of GELU's erf form in one pass
// instead of the eleven nodes ops/elementwise/gelu_grad.cpp emits, and with approximate "tanh"
// the tanh form's instead of eighteen (the node's contract: engine/rewrites/gelu_fusion.h). Phi
// through Erf's rational approximation, as the fused forward Gelu (math::GeluErfForm), and phi
// through the vectorised exponential; the shared binary kernel broadcasts dY and x as Mul's
// operands.
#include "engine/rewrites/rewrite_domain.h"
#include "ops/cpu/elementwise.h"
#include "ops/math/make_functor.h"
#include "ops/math/unary_functors.h"

namespace dprun::ew {
namespace {

struct GeluErfGrad {
  template <class T>
  T operator()(T dy, T x) const {
    const T cdf = (T(1) + math::Erf{}(x * static_cast<T>(0.7071067811865476))) * T(0.5);
    const T pdf = math::exp_of(x * x * T(-0.5)) * static_cast<T>(0.3989422804014327);
    return dy * (cdf + x * pdf);
  }
};

// The tanh form's: with s = (1 + tanh(u)) / 2 = sigmoid(2u), u = k (x + a x^3), GELU'(x) =
// s + 2 x s (1 - s) k (1 + 3 a x^2), which the rule writes as (1 + t) / 2 + (x / 2)(1 - t^2) u'.
// The sigmoid, as the fused forward Gelu's (math::GeluTanh), does not cancel for negative u.
struct GeluTanhGrad {
  template <class T>
  T operator()(T dy, T x) const {
    const T k = static_cast<T>(0.7978845608028654), a = static_cast<T>(0.044715);
    const T x2 = x * x;
    const T s = math::Sigmoid{}(T(2) * k * (x + a * x2 * x));
    return dy * (s + T(2) * x * s * (T(1) - s) * k * (T(1) + T(3) * a * x2));
  }
};

std::unique_ptr<OpKernel> make_gelu_grad(const KernelInfo& info) {
  if (gelu_uses_tanh(info)) return make_kernel<BinaryKernel<GeluTanhGrad, Types::Float>>(info);
  return make_kernel<BinaryKernel<GeluErfGrad, Types::Float>>(info);
}

DPRUN_REGISTER_KERNEL({.domain = kRewriteDomain,
                       .op_type = "GeluGrad",
                       .dtypes = {DType::Float32, DType::Float64},
                       .factory = make_gelu_grad});

}  // namespace
}  // namespace dprun::ew
