// The CUDA SoftmaxCrossEntropyLoss and NegativeLogLikelihoodLoss, for float32 and float64 scores
// (compute: ops/loss/softmax_cross_entropy.cu).
#include "ops/cuda/defs/cuda_compute.h"

namespace dprun {
namespace {

DPRUN_REGISTER_KERNEL({.op_type = "SoftmaxCrossEntropyLoss",
                       .since = 12,
                       .device = DeviceType::CUDA,
                       .dtypes = kFloatTypes,
                       .factory = cuda_compute("SoftmaxCrossEntropyLoss")});
DPRUN_REGISTER_KERNEL({.op_type = "NegativeLogLikelihoodLoss",
                       .since = 12,
                       .device = DeviceType::CUDA,
                       .dtypes = kFloatTypes,
                       .factory = cuda_compute("NegativeLogLikelihoodLoss")});

}  // namespace
}  // namespace dprun
