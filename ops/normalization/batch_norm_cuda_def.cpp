// The CUDA BatchNormalization inference on cuDNN, float32 (compute:
// ops/normalization/batch_norm_cuda.cpp). Training mode is
// ops/normalization/batch_norm_training_cuda_def.cpp, 16 bits
// ops/normalization/batch_norm_16bit_cuda_def.cpp.
#include "ops/cuda/defs/cuda_compute.h"
#include "ops/cuda/defs/cudnn_limits.h"
#include "ops/cuda/defs/node_checks.h"
#include "ops/normalization/batch_norm_checks.h"

namespace dprun {
namespace {

/// Declined (the node runs on the host, where the CPU kernel has every mode): training mode,
/// spatial=0 before opset 9, epsilon below cuDNN's least, X or parameters known not to be
/// float32.
bool batch_norm_fits_cudnn(const KernelInfo& info) {
  if (batch_norm_training(info) || batch_norm_per_activation(info)) return false;
  if (static_cast<double>(info.node.attr_float("epsilon", 1e-5f)) < cudnn::kBnMinEpsilon)
    return false;
  for (size_t i = 0; i < 5; ++i)
    if (cudnn::known_not_float32(info, i)) return false;
  return true;
}

DPRUN_REGISTER_KERNEL({.op_type = "BatchNormalization",
                       .since = 1,
                       .device = DeviceType::CUDA,
                       .dtypes = {DType::Float32},
                       .impl = "cudnn",
                       .accepts = batch_norm_fits_cudnn,
                       .factory = cuda_compute("BatchNormalization/cudnn")});

}  // namespace
}  // namespace dprun
