// The CUDA MatMul on cuBLAS, float32, float16 and bfloat16 (compute: ops/linalg/matmul_cuda.cpp).
#include "ops/cuda/defs/cuda_compute.h"

namespace dprun {
namespace {

DPRUN_REGISTER_KERNEL({.op_type = "MatMul",
                       .since = 1,
                       .device = DeviceType::CUDA,
                       .dtypes = {DType::Float32, DType::Float16, DType::BFloat16},
                       .factory = cuda_compute("MatMul")});

}  // namespace
}  // namespace dprun
