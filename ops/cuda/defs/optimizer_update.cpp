// The CUDA update kernels of the optimizers, the loss scaler, gradient clipping and gradient
// accumulation, in dprun's domain "ai.dprun" (compute: ops/cuda/optimizer_update.cu).
#include "engine/training/optimizer_update.h"
#include "ops/cuda/defs/cuda_compute.h"

namespace dprun {
namespace {

/// Declines a node inside a graph, as make_update_kernel does: the updates are not ops for
/// graphs, so a model that names one fails at load.
bool outside_a_graph(const KernelInfo& info) {
  return info.graph == nullptr;
}

DPRUN_REGISTER_KERNEL({.domain = kDprunDomain,
                       .op_type = kSgdUpdateOp,
                       .device = DeviceType::CUDA,
                       .dtypes = kFloatTypes,
                       .accepts = outside_a_graph,
                       .factory = cuda_compute("ai.dprun::SgdUpdate")});
DPRUN_REGISTER_KERNEL({.domain = kDprunDomain,
                       .op_type = kAdamUpdateOp,
                       .device = DeviceType::CUDA,
                       .dtypes = kFloatTypes,
                       .accepts = outside_a_graph,
                       .factory = cuda_compute("ai.dprun::AdamUpdate")});

DPRUN_REGISTER_KERNEL({.domain = kDprunDomain,
                       .op_type = kScaleGradientOp,
                       .device = DeviceType::CUDA,
                       .dtypes = kFloatTypes,
                       .accepts = outside_a_graph,
                       .factory = cuda_compute("ai.dprun::ScaleGradient")});

DPRUN_REGISTER_KERNEL({.domain = kDprunDomain,
                       .op_type = kGradientNormOp,
                       .device = DeviceType::CUDA,
                       .dtypes = kFloatTypes,
                       .accepts = outside_a_graph,
                       .factory = cuda_compute("ai.dprun::GradientNorm")});

DPRUN_REGISTER_KERNEL({.domain = kDprunDomain,
                       .op_type = kAddGradientOp,
                       .device = DeviceType::CUDA,
                       .dtypes = kFloatTypes,
                       .accepts = outside_a_graph,
                       .factory = cuda_compute("ai.dprun::AddGradient")});

}  // namespace
}  // namespace dprun
