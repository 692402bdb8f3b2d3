// The compute of the CUDA activations (defined in ops/elementwise/activations_cuda_def.cpp): the
// unary ops of ops/elementwise/activations.cpp, with the same functors and attributes.
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

DPRUN_CUDA_ELEMENTWISE("Relu", UnaryKernel<math::Relu, SignedAndHalfTypes>);
DPRUN_CUDA_ELEMENTWISE("LeakyRelu", F<math::LeakyRelu>);
DPRUN_CUDA_ELEMENTWISE("Elu", F<math::Elu>);
DPRUN_CUDA_ELEMENTWISE("Selu", F<math::Selu>);
DPRUN_CUDA_ELEMENTWISE("Celu", F<math::Celu>);
DPRUN_CUDA_ELEMENTWISE("Sigmoid", F<math::Sigmoid>);
DPRUN_CUDA_ELEMENTWISE("Tanh", F<math::Tanh>);
DPRUN_CUDA_ELEMENTWISE("HardSigmoid", F<math::HardSigmoid>);
DPRUN_CUDA_ELEMENTWISE("HardSwish", F<math::HardSwish>);
DPRUN_CUDA_ELEMENTWISE("Softplus", F<math::Softplus>);
DPRUN_CUDA_ELEMENTWISE("Softsign", F<math::Softsign>);
DPRUN_CUDA_ELEMENTWISE("ThresholdedRelu", F<math::ThresholdedRelu>);
DPRUN_CUDA_ELEMENTWISE("Mish", F<math::Mish>);
DPRUN_CUDA_ELEMENTWISE("Shrink", UnaryKernel<math::Shrink, NumericAndHalfTypes>);
DPRUN_CUDA_COMPUTE("Gelu", make_gelu);
DPRUN_CUDA_ELEMENTWISE("dprun::Gelu", F<math::GeluErfForm>);

}  // namespace
}  // namespace dprun::cuda_ew
