#pragma once
// Row-major matrix products on cuBLAS (float32, float16, bfloat16), which is column-major. A
// row-major [R, C] matrix is, read column-major, its transpose [C, R] with leading dimension C, so
// the row-major C = op(A) op(B) is computed as the column-major C^T = op(B)^T op(A)^T: the operands
// are swapped and nothing is transposed in memory. The handle's math mode is left as it is
// (default: no TF32); a product that may use TF32 (PlanOptions::allow_tf32) asks for it per call
// through cublasGemmEx's compute type, so a pooled handle never changes state.
#include <cublas_v2.h>

#include <algorithm>
#include <climits>
#include <cstdint>

#include "engine/backends/cuda/cuda_check.h"
#include "engine/kernel.h"

namespace dprun {

/// `value` as the int cuBLAS takes; fails naming `what` when it does not fit.
inline int cublas_int(int64_t value, const KernelContext& ctx, const char* what) {
  if (value < 0 || value > INT_MAX) ctx.fail(what, " ", value, " is beyond cuBLAS's int range");
  return static_cast<int>(value);
}

/// The cuBLAS element type of a float32, float16 or bfloat16 tensor; fails naming the dtype
/// otherwise.
inline cudaDataType_t cublas_type(DType dtype, const KernelContext& ctx) {
  switch (dtype) {
    case DType::Float32:
      return CUDA_R_32F;
    case DType::Float16:
      return CUDA_R_16F;
    case DType::BFloat16:
      return CUDA_R_16BF;
    default:
      ctx.fail("cuBLAS products take float32, float16 or bfloat16, not ", dtype_name(dtype));
  }
}

/// One row-major product c[m, n] = alpha * op(a) op(b) + beta * c, where a is [m, k] ([k, m]
/// when trans_a) and b is [k, n] ([n, k] when trans_b), repeated over `batch` matrices whose
/// starts are `stride_*` elements apart (0: the same matrix for every batch). With beta == 0,
/// c is not read. Operands and result are of one element type; 16-bit products sum in float32
/// (CUBLAS_COMPUTE_32F, on tensor cores) and round the result once, as PyTorch's do.
struct RowMajorGemm {
  cudaDataType_t type = CUDA_R_32F;
  bool trans_a = false, trans_b = false;
  /// Round the operands to TF32 on tensor cores (CUBLAS_COMPUTE_32F_FAST_TF32); sums stay float32.
  bool tf32 = false;
  int64_t m = 0, n = 0, k = 0;
  int64_t batch = 1, stride_a = 0, stride_b = 0, stride_c = 0;

  void run(cublasHandle_t handle, const KernelContext& ctx, float alpha, const void* a,
           const void* b, float beta, void* c) const {
    const int mi = cublas_int(m, ctx, "M"), ni = cublas_int(n, ctx, "N"),
              ki = cublas_int(k, ctx, "K");
    // Leading dimensions are the row lengths as stored; cuBLAS wants at least 1 even when a
    // dimension is empty.
    const int lda = std::max(1, trans_a ? mi : ki), ldb = std::max(1, trans_b ? ki : ni),
              ldc = std::max(1, ni);
    const cublasOperation_t op_a = trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
    const cublasOperation_t op_b = trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
    const auto* fa = static_cast<const float*>(a);
    const auto* fb = static_cast<const float*>(b);
    auto* fc = static_cast<float*>(c);
    if (tf32 || type != CUDA_R_32F) {
      run_ex(handle, ctx, op_a, op_b, mi, ni, ki, lda, ldb, ldc, alpha, a, b, beta, c);
    } else if (batch == 1) {
      cublas_check(
          cublasSgemm(handle, op_b, op_a, ni, mi, ki, &alpha, fb, ldb, fa, lda, &beta, fc, ldc),
          "cublasSgemm of [", m, ", ", k, "] x [", k, ", ", n, "]");
    } else {
      cublas_check(cublasSgemmStridedBatched(handle, op_b, op_a, ni, mi, ki, &alpha, fb, ldb,
                                             stride_b, fa, lda, stride_a, &beta, fc, ldc, stride_c,
                                             cublas_int(batch, ctx, "batch count")),
                   "cublasSgemmStridedBatched of ", batch, " x [", m, ", ", k, "] x [", k, ", ", n,
                   "]");
    }
  }

 private:
  /// The same product through cublasGemmEx: float32 storage with TF32 tensor-core math, or
  /// 16-bit storage summed in float32.
  void run_ex(cublasHandle_t handle, const KernelContext& ctx, cublasOperation_t op_a,
              cublasOperation_t op_b, int mi, int ni, int ki, int lda, int ldb, int ldc,
              float alpha, const void* a, const void* b, float beta, void* c) const {
    const cublasComputeType_t compute =
        tf32 && type == CUDA_R_32F ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
    if (batch == 1) {
      cublas_check(cublasGemmEx(handle, op_b, op_a, ni, mi, ki, &alpha, b, type, ldb, a, type, lda,
                                &beta, c, type, ldc, compute, CUBLAS_GEMM_DEFAULT),
                   "cublasGemmEx of [", m, ", ", k, "] x [", k, ", ", n, "]");
    } else {
      cublas_check(cublasGemmStridedBatchedEx(handle, op_b, op_a, ni, mi, ki, &alpha, b, type, ldb,
                                              stride_b, a, type, lda, stride_a, &beta, c, type, ldc,
                                              stride_c, cublas_int(batch, ctx, "batch count"),
                                              compute, CUBLAS_GEMM_DEFAULT),
                   "cublasGemmStridedBatchedEx of ", batch, " x [", m, ", ", k, "] x [", k, ", ", n,
                   "]");
    }
  }
};

}  // namespace dprun
