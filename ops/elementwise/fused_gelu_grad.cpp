// GeluGrad (rewrite domain): dY * (Phi(x) + x phi(x)), the gradient of GELU's erf form in one pass
// instead of the eleven nodes ops/elementwise/gelu_grad.cpp emits (the node's contract:
// engine/rewrites/gelu_fusion.h). Phi through Erf's rational approximation, as the fused
// forward Gelu (math::GeluErfForm), and phi through the vectorised exponential; the shared
// binary kernel broadcasts dY and x as Mul's operands.
#include "engine/rewrites/rewrite_domain.h"
#include "ops/cpu/elementwise.h"
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

DPRUN_REGISTER_KERNEL({.domain = kRewriteDomain,
                       .op_type = "GeluGrad",
                       .dtypes = {DType::Float32, DType::Float64},
                       .factory = make_kernel<BinaryKernel<GeluErfGrad, Types::Float>>});

}  // namespace
}  // namespace dprun::ew
