// The CUDA Softmax and LogSoftmax, for float32, float16 and bfloat16 (compute:
// ops/softmax/softmax.cu).
#include "ops/cuda/defs/cuda_compute.h"

namespace dprun {
namespace {

DPRUN_REGISTER_KERNEL({.op_type = "Softmax",
                       .since = 1,
                       .device = DeviceType::CUDA,
                       .dtypes = {DType::Float32, DType::Float16, DType::BFloat16},
                       .factory = cuda_compute("Softmax")});
DPRUN_REGISTER_KERNEL({.op_type = "LogSoftmax",
                       .since = 1,
                       .device = DeviceType::CUDA,
                       .dtypes = {DType::Float32, DType::Float16, DType::BFloat16},
                       .factory = cuda_compute("LogSoftmax")});

}  // namespace
}  // namespace dprun
