// CUDA activations: the unary ops of ops/cpu/activations.cpp, with the same functors,
// attributes and opsets. PRelu (binary, with its legacy per-channel slope) is not covered.
#include "engine/rewrites/rewrite_domain.h"
#include "ops/cuda/elementwise.cuh"
#include "ops/math/unary_functors.h"

namespace dprun::cuda_ew {
namespace {

template <class Op>
using F = UnaryKernel<Op, FloatAndHalfTypes>;

/// Gelu picks its functor from `approximate` when built, as on the CPU.
std::unique_ptr<OpKernel> make_gelu(const KernelInfo& info) {
  if (ew::gelu_uses_tanh(info)) return make_kernel<F<math::GeluTanh>>(info);
  return make_kernel<F<math::Gelu>>(info);
}

DPRUN_CUDA_ELEMENTWISE("Relu", 1, UnaryKernel<math::Relu, SignedAndHalfTypes>);
DPRUN_CUDA_ELEMENTWISE("LeakyRelu", 1, F<math::LeakyRelu>);
DPRUN_CUDA_ELEMENTWISE("Elu", 1, F<math::Elu>);
DPRUN_CUDA_ELEMENTWISE("Selu", 1, F<math::Selu>);
DPRUN_CUDA_ELEMENTWISE("Celu", 12, F<math::Celu>);
DPRUN_CUDA_ELEMENTWISE("Sigmoid", 1, F<math::Sigmoid>);
DPRUN_CUDA_ELEMENTWISE("Tanh", 1, F<math::Tanh>);
DPRUN_CUDA_ELEMENTWISE("HardSigmoid", 1, F<math::HardSigmoid>);
DPRUN_CUDA_ELEMENTWISE("HardSwish", 14, F<math::HardSwish>);
DPRUN_CUDA_ELEMENTWISE("Softplus", 1, F<math::Softplus>);
DPRUN_CUDA_ELEMENTWISE("Softsign", 1, F<math::Softsign>);
DPRUN_CUDA_ELEMENTWISE("ThresholdedRelu", 1, F<math::ThresholdedRelu>);
DPRUN_CUDA_ELEMENTWISE("Mish", 18, F<math::Mish>);
DPRUN_CUDA_ELEMENTWISE("Shrink", 9, UnaryKernel<math::Shrink, NumericAndHalfTypes>);
DPRUN_REGISTER_KERNEL({.op_type = "Gelu",
                       .since = 20,
                       .device = DeviceType::CUDA,
                       .dtypes = dtypes(FloatAndHalfTypes{}),
                       .impl = kImpl,
                       .factory = make_gelu});
// The op fusion's Gelu (engine/rewrites/op_fusion.h), always the erf form.
DPRUN_REGISTER_KERNEL({.domain = kRewriteDomain,
                       .op_type = "Gelu",
                       .device = DeviceType::CUDA,
                       .dtypes = dtypes(FloatAndHalfTypes{}),
                       .impl = kImpl,
                       .factory = make_kernel<F<math::GeluErfForm>>});

}  // namespace
}  // namespace dprun::cuda_ew
