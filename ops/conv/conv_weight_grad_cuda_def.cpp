// The CUDA ConvWeightGrad (rewrite domain) on cuDNN, float32 (compute:
// ops/conv/conv_weight_grad_cuda.cpp).
#include "engine/rewrites/rewrite_domain.h"
#include "ops/cuda/defs/cuda_compute.h"
#include "ops/cuda/defs/node_checks.h"

namespace dprun {
namespace {

/// Declined (the node runs on the host): other than 1 to 3 spatial dims (by kernel_shape), X
/// or dY known not to be float32. Nothing for its geometry.
bool conv_weight_grad_fits_cudnn(const KernelInfo& info) {
  const size_t spatial = info.node.attr_ints("kernel_shape", {}).size();
  return spatial >= 1 && spatial <= 3 && !cudnn::known_not_float32(info, 0) &&
         !cudnn::known_not_float32(info, 1);
}

DPRUN_REGISTER_KERNEL({.domain = kRewriteDomain,
                       .op_type = "ConvWeightGrad",
                       .device = DeviceType::CUDA,
                       .dtypes = {DType::Float32},
                       .impl = "cudnn",
                       .accepts = conv_weight_grad_fits_cudnn,
                       .factory = cuda_compute("dprun::ConvWeightGrad")});

}  // namespace
}  // namespace dprun
