// The CUDA BatchNormTrainingGrad (rewrite domain), float32 (compute:
// ops/normalization/batch_norm_training_grad.cu).
#include "engine/rewrites/rewrite_domain.h"
#include "ops/cuda/defs/cuda_compute.h"

namespace dprun {
namespace {

DPRUN_REGISTER_KERNEL({.domain = kRewriteDomain,
                       .op_type = "BatchNormTrainingGrad",
                       .device = DeviceType::CUDA,
                       .dtypes = {DType::Float32},
                       .factory = cuda_compute("dprun::BatchNormTrainingGrad")});

}  // namespace
}  // namespace dprun
