// The CUDA MaxPool asking for its Indices output, the pooling of a CNN's training graph
// (compute: ops/pool/max_pool_indices.cu). The cuDNN MaxPool is ops/pool/pool_cuda_def.cpp.
#include "ops/cuda/defs/cuda_compute.h"
#include "ops/pool/pool_types.h"

namespace dprun {
namespace {

/// Only nodes naming Indices (the rest go to cuDNN) with 1 to kMaxSpatial spatial dims;
/// unknown storage_order values are left for the CPU kernel to reject.
bool max_pool_indices_fits(const KernelInfo& info) {
  const Node& node = info.node;
  if (node.outputs.size() < 2 || node.outputs[1].empty()) return false;
  const size_t nd = node.attr_ints("kernel_shape", {}).size();
  if (nd < 1 || nd > cuda_pool::kMaxSpatial) return false;
  const int64_t storage_order = node.attr_int("storage_order", 0);
  return storage_order == 0 || storage_order == 1;
}

// Beside the cuDNN kernel (pool_cuda_def.cpp), with the same `since` so that both are considered:
// it accepts exactly the nodes that one declines for naming Indices.
DPRUN_REGISTER_KERNEL({.op_type = "MaxPool",
                       .since = 1,
                       .device = DeviceType::CUDA,
                       .dtypes = cuda_ew::dtypes(cuda_pool::MaxPoolTypes{}),
                       .impl = "indices",
                       .accepts = max_pool_indices_fits,
                       .factory = cuda_compute("MaxPool/indices")});

}  // namespace
}  // namespace dprun
