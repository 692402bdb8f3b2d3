// The CUDA MatMulBias (rewrite domain), the op fusion's MatMul with its bias Add, on cuBLASLt,
// float32, float16 and bfloat16 (compute: ops/linalg/matmul_bias_cuda.cpp).
#include "engine/rewrites/rewrite_domain.h"
#include "ops/cuda/defs/cuda_compute.h"
#include "ops/cuda/defs/node_checks.h"

namespace dprun {
namespace {

/// Declined (the CPU kernel runs): a B known not to be 2-D, which the fusion never writes.
bool matmul_bias_fits(const KernelInfo& info) {
  const size_t b_rank = cudnn::known_rank(info, 1);
  return b_rank == 0 || b_rank == 2;
}

DPRUN_REGISTER_KERNEL({.domain = kRewriteDomain,
                       .op_type = "MatMulBias",
                       .device = DeviceType::CUDA,
                       .dtypes = {DType::Float32, DType::Float16, DType::BFloat16},
                       .impl = "cublaslt",
                       .accepts = matmul_bias_fits,
                       .factory = cuda_compute("dprun::MatMulBias")});

}  // namespace
}  // namespace dprun
