// The CUDA update kernels of the optimizers, the loss scaler, gradient clipping and gradient
// accumulation, in dprun's domain "ai.dprun" (compute: ops/training/optimizer_update.cu).
#include <string>

#include "engine/training/optimizer_update.h"
#include "ops/cuda/defs/cuda_compute.h"

namespace dprun {
namespace {

/// Declines a node inside a graph, as make_update_kernel does: the updates are not ops for
/// graphs, so a model that names one fails at load.
bool outside_a_graph(const KernelInfo& info) {
  return info.graph == nullptr;
}

// One definition per update op, alike but for the op; each compute is named "ai.dprun::Op".
[[maybe_unused]] const bool defined = [] {
  for (const char* op :
       {kSgdUpdateOp, kAdamUpdateOp, kScaleGradientOp, kGradientNormOp, kAddGradientOp})
    KernelRegistry::instance().add({.domain = kDprunDomain,
                                    .op_type = op,
                                    .device = DeviceType::CUDA,
                                    .dtypes = kFloatTypes,
                                    .accepts = outside_a_graph,
                                    .factory = cuda_compute(kDprunDomain + std::string("::") + op)},
                                   __FILE__);
  return true;
}();

}  // namespace
}  // namespace dprun
