// The CUDA activations: the unary ops of ops/elementwise/activations.cpp, with the same opsets
// (compute: ops/elementwise/activations.cu). PRelu (binary, with its legacy per-channel slope) is
// ops/elementwise/prelu_cuda_def.cpp.
#include "engine/rewrites/rewrite_domain.h"
#include "ops/cuda/defs/cuda_types.h"

namespace dprun::cuda_ew {
namespace {

DPRUN_CUDA_ELEMENTWISE_DEF("Relu", 1, SignedAndHalfTypes);
DPRUN_CUDA_ELEMENTWISE_DEF("LeakyRelu", 1, FloatAndHalfTypes);
DPRUN_CUDA_ELEMENTWISE_DEF("Elu", 1, FloatAndHalfTypes);
DPRUN_CUDA_ELEMENTWISE_DEF("Selu", 1, FloatAndHalfTypes);
DPRUN_CUDA_ELEMENTWISE_DEF("Celu", 12, FloatAndHalfTypes);
DPRUN_CUDA_ELEMENTWISE_DEF("Sigmoid", 1, FloatAndHalfTypes);
DPRUN_CUDA_ELEMENTWISE_DEF("Tanh", 1, FloatAndHalfTypes);
DPRUN_CUDA_ELEMENTWISE_DEF("HardSigmoid", 1, FloatAndHalfTypes);
DPRUN_CUDA_ELEMENTWISE_DEF("HardSwish", 14, FloatAndHalfTypes);
DPRUN_CUDA_ELEMENTWISE_DEF("Softplus", 1, FloatAndHalfTypes);
DPRUN_CUDA_ELEMENTWISE_DEF("Softsign", 1, FloatAndHalfTypes);
DPRUN_CUDA_ELEMENTWISE_DEF("ThresholdedRelu", 1, FloatAndHalfTypes);
DPRUN_CUDA_ELEMENTWISE_DEF("Mish", 18, FloatAndHalfTypes);
DPRUN_CUDA_ELEMENTWISE_DEF("Shrink", 9, NumericAndHalfTypes);
// Gelu picks its functor (erf or tanh) from `approximate` when its compute is built.
DPRUN_CUDA_ELEMENTWISE_DEF("Gelu", 20, FloatAndHalfTypes);
// The op fusion's Gelu (engine/rewrites/op_fusion.h) in its erf form; its tanh form stays the
// exporter's chain of ops on a GPU.
bool erf_form(const KernelInfo& info) {
  return info.node.attr_string("approximate", "none") == "none";
}
DPRUN_REGISTER_KERNEL({.domain = kRewriteDomain,
                       .op_type = "Gelu",
                       .device = DeviceType::CUDA,
                       .dtypes = dtypes(FloatAndHalfTypes{}),
                       .impl = kImpl,
                       .accepts = erf_form,
                       .factory = cuda_compute("dprun::Gelu")});

}  // namespace
}  // namespace dprun::cuda_ew
