// The CUDA poolings on cuDNN: MaxPool without Indices, AveragePool, GlobalMaxPool and
// GlobalAveragePool, float32, float16 and bfloat16 (compute: ops/pool/pool_cuda.cpp). MaxPool
// asking for Indices is ops/pool/max_pool_indices_cuda_def.cpp.
#include "ops/cuda/defs/cuda_compute.h"
#include "ops/cuda/defs/node_checks.h"
#include "ops/pool/pool_types.h"

namespace dprun {
namespace {

using cuda_pool::kPoolTypes;

/// Declined (the node runs on the host): MaxPool asked for its Indices output (no cuDNN
/// counterpart), any dilation other than 1 (cuDNN pooling has none), other than 1 to 3
/// spatial dims, X known to be of another dtype.
template <bool kMax>
bool pool_fits_cudnn(const KernelInfo& info) {
  if (cudnn::known_not_of(info, 0, kPoolTypes)) return false;
  if (kMax && info.node.outputs.size() > 1 && !info.node.outputs[1].empty()) return false;
  for (int64_t d : info.node.attr_ints("dilations", {}))
    if (d != 1) return false;
  const size_t nd = info.node.attr_ints("kernel_shape", {}).size();
  return nd >= 1 && nd <= 3;
}

/// Declined (host): X known to be of another dtype.
bool global_pool_fits_cudnn(const KernelInfo& info) {
  return !cudnn::known_not_of(info, 0, kPoolTypes);
}

DPRUN_REGISTER_KERNEL({.op_type = "MaxPool",
                       .since = 1,
                       .device = DeviceType::CUDA,
                       .dtypes = kPoolTypes,
                       .impl = "cudnn",
                       .accepts = pool_fits_cudnn<true>,
                       .factory = cuda_compute("MaxPool/cudnn")});
DPRUN_REGISTER_KERNEL({.op_type = "AveragePool",
                       .since = 1,
                       .device = DeviceType::CUDA,
                       .dtypes = kPoolTypes,
                       .impl = "cudnn",
                       .accepts = pool_fits_cudnn<false>,
                       .factory = cuda_compute("AveragePool")});
DPRUN_REGISTER_KERNEL({.op_type = "GlobalMaxPool",
                       .since = 1,
                       .device = DeviceType::CUDA,
                       .dtypes = kPoolTypes,
                       .impl = "cudnn",
                       .accepts = global_pool_fits_cudnn,
                       .factory = cuda_compute("GlobalMaxPool")});
DPRUN_REGISTER_KERNEL({.op_type = "GlobalAveragePool",
                       .since = 1,
                       .device = DeviceType::CUDA,
                       .dtypes = kPoolTypes,
                       .impl = "cudnn",
                       .accepts = global_pool_fits_cudnn,
                       .factory = cuda_compute("GlobalAveragePool")});

}  // namespace
}  // namespace dprun
