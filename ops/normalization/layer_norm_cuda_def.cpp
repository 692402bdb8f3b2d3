// The CUDA LayerNormalization, for float32, float64, float16 and bfloat16 (compute:
// ops/normalization/layer_norm.cu).
#include "ops/cuda/defs/cuda_compute.h"

namespace dprun {
namespace {

/// Declines nodes whose Scale or B is known to differ from X's dtype (the CPU kernel converts;
/// the CUDA one reads them as X's type).
bool params_of_x_dtype(const KernelInfo& info) {
  const auto& types = info.input_types;
  for (size_t i = 1; i < types.size() && i < 3; ++i)
    if (types[0] && types[i] && types[i]->dtype != types[0]->dtype) return false;
  return true;
}

DPRUN_REGISTER_KERNEL({.op_type = "LayerNormalization",
                       .since = 1,
                       .device = DeviceType::CUDA,
                       .dtypes = {DType::Float32, DType::Float64, DType::Float16, DType::BFloat16},
                       .accepts = params_of_x_dtype,
                       .factory = cuda_compute("LayerNormalization")});

}  // namespace
}  // namespace dprun
