// The CUDA Gemm and the op fusion's FusedGemm (rewrite domain) on cuBLAS and cuBLASLt, float32,
// float16 and bfloat16 (compute: ops/linalg/gemm.cu).
#include "engine/rewrites/rewrite_domain.h"
#include "ops/cuda/defs/cuda_compute.h"

namespace dprun {
namespace {

DPRUN_REGISTER_KERNEL({.op_type = "Gemm",
                       .since = 1,
                       .device = DeviceType::CUDA,
                       .dtypes = {DType::Float32, DType::Float16, DType::BFloat16},
                       .factory = cuda_compute("Gemm")});
DPRUN_REGISTER_KERNEL({.domain = kRewriteDomain,
                       .op_type = "FusedGemm",
                       .device = DeviceType::CUDA,
                       .dtypes = {DType::Float32, DType::Float16, DType::BFloat16},
                       .impl = "cublaslt",
                       .factory = cuda_compute("dprun::FusedGemm")});

}  // namespace
}  // namespace dprun
