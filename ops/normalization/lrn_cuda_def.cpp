// The CUDA LRN on cuDNN's cross-channel LRN, float32 (compute: ops/normalization/lrn_cuda.cpp).
#include "ops/cuda/defs/cuda_compute.h"
#include "ops/cuda/defs/cudnn_limits.h"
#include "ops/cuda/defs/node_checks.h"

namespace dprun {
namespace {

/// Declined (the node runs on the host): parameters outside cuDNN's ranges (size outside
/// [kLrnMinN, kLrnMaxN], bias below kLrnMinK, beta below kLrnMinBeta), X known not to be
/// float32.
bool lrn_fits_cudnn(const KernelInfo& info) {
  const Node& node = info.node;
  const int64_t size = node.attr_int("size", 0);
  if (size < cudnn::kLrnMinN || size > cudnn::kLrnMaxN) return false;
  if (node.attr_float("bias", 1.0f) < cudnn::kLrnMinK) return false;
  if (node.attr_float("beta", 0.75f) < cudnn::kLrnMinBeta) return false;
  return !cudnn::known_not_float32(info, 0);
}

DPRUN_REGISTER_KERNEL({.op_type = "LRN",
                       .since = 1,
                       .device = DeviceType::CUDA,
                       .dtypes = {DType::Float32},
                       .impl = "cudnn",
                       .accepts = lrn_fits_cudnn,
                       .factory = cuda_compute("LRN")});

}  // namespace
}  // namespace dprun
