// The CUDA Conv on cuDNN, float32, float16 and bfloat16 (compute: ops/conv/conv_cuda.cpp).
#include "ops/cuda/defs/cuda_compute.h"
#include "ops/cuda/defs/node_checks.h"

namespace dprun {
namespace {

/// Declined (the node runs on the host): more than 3 spatial dims, a rank that no type or
/// attribute tells, inputs known to be of other dtypes. Nothing for its pads.
bool conv_fits_cudnn(const KernelInfo& info) {
  return cudnn::conv_node_fits(info, {DType::Float32, DType::Float16, DType::BFloat16});
}

DPRUN_REGISTER_KERNEL({.op_type = "Conv",
                       .since = 1,
                       .device = DeviceType::CUDA,
                       .dtypes = {DType::Float32, DType::Float16, DType::BFloat16},
                       .impl = "cudnn",
                       .accepts = conv_fits_cudnn,
                       .factory = cuda_compute("Conv")});

}  // namespace
}  // namespace dprun
