// The CUDA ArgMax and ArgMin over float32, float16 and bfloat16 input (int64 output), with the
// semantics of ops/reduce/argmax.cpp (compute: ops/reduce/argmax.cu). Other dtypes have no CUDA
// definition and run on the host.
#include "engine/kernel.h"
#include "ops/cuda/defs/cuda_compute.h"

namespace dprun {
namespace {

DPRUN_REGISTER_KERNEL({.op_type = "ArgMax",
                       .since = 1,
                       .device = DeviceType::CUDA,
                       .dtypes = {DType::Float32, DType::Float16, DType::BFloat16},
                       .factory = cuda_compute("ArgMax")});
DPRUN_REGISTER_KERNEL({.op_type = "ArgMin",
                       .since = 1,
                       .device = DeviceType::CUDA,
                       .dtypes = {DType::Float32, DType::Float16, DType::BFloat16},
                       .factory = cuda_compute("ArgMin")});

}  // namespace
}  // namespace dprun
