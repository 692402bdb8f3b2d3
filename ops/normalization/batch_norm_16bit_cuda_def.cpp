// The CUDA BatchNormalization inference in float16 and bfloat16, bit for bit the CPU's
// (compute: ops/normalization/batch_norm_16bit.cu).
#include "ops/cuda/defs/cuda_compute.h"
#include "ops/normalization/batch_norm_checks.h"

namespace dprun {
namespace {

/// Declined (the node runs on the host), as by the float32 kernel: training mode, spatial=0
/// before opset 9, parameters known to differ from X's dtype.
bool batch_norm_16bit_fits(const KernelInfo& info) {
  return !batch_norm_training(info) && !batch_norm_per_activation(info) &&
         batch_norm_params_of_x_dtype(info);
}

DPRUN_REGISTER_KERNEL({.op_type = "BatchNormalization",
                       .since = 1,
                       .device = DeviceType::CUDA,
                       .dtypes = {DType::Float16, DType::BFloat16},
                       .impl = "affine",
                       .accepts = batch_norm_16bit_fits,
                       .factory = cuda_compute("BatchNormalization/16bit")});

}  // namespace
}  // namespace dprun
