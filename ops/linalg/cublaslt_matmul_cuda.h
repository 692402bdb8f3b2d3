#pragma once
// Row-major products on cuBLASLt with a bias epilogue: d[m, n] = alpha * op(a) op(b) + bias[n]
// on every row, then a fused activation, Relu in the one kernel that writes the product
// (cuBLAS's own GEMMs would need a second pass over d to add the bias), any other in a pass
// after it (fused_epilogue_cuda.h). Float32, or float16 and bfloat16 (operands, bias and d of one
// type), summed in float32 with the bias added before d is rounded once, as the CPU's oneDNN
// product rounds it. Operands are swapped
// as in cublas_gemm_cuda.h: the row-major d is, read column-major, d^T[n, m] = op(b)^T op(a)^T,
// whose n rows are exactly what cuBLASLt's bias vector runs along.
#include <cstdint>

#include "engine/backends/cuda/cuda_execution_context.h"
#include "engine/kernel.h"
#include "ops/common/shape_cache.h"
#include "ops/linalg/fused_epilogue_cuda.h"

namespace dprun {

/// One product's shape and epilogue; a is [m, k] ([k, m] when trans_a), b is [k, n] ([n, k]
/// when trans_b), d and the bias are contiguous. k > 0 (an empty sum has no GEMM to run).
struct LtProduct {
  /// The element type of a, b, the bias and d: float32, float16 or bfloat16.
  DType dtype = DType::Float32;
  bool trans_a = false, trans_b = false;
  /// Float32 only: round the operands to TF32 on tensor cores (CUBLAS_COMPUTE_32F_FAST_TF32);
  /// sums stay float32.
  bool tf32 = false;
  int64_t m = 0, n = 0, k = 0;
};

/// cuBLASLt's choice for one product: the algorithm and the workspace it needs. Kept per
/// kernel (LtAlgorithms), since asking cuBLASLt's heuristic costs more than a small product.
struct LtAlgorithm;

/// The algorithms a kernel's products have used, by shape, epilogue, operand alignment and
/// GPU. Thread-safe; a kernel shared by replicas on several GPUs keeps one per GPU.
class LtAlgorithms {
 public:
  /// d = activation(alpha * op(a) op(b) + bias) on the run's stream; the algorithm is asked of
  /// cuBLASLt's heuristic on first use of the key. Returns false, having queued nothing, where
  /// cuBLASLt offers no algorithm for the product (remembered for the key), the bias is less
  /// than 16-byte aligned, or DPRUN_NO_CUBLASLT=1 is set: the caller then computes it with
  /// cuBLAS. Fails naming the node
  /// where a dimension is beyond cuBLAS's range or cuBLASLt fails otherwise.
  bool run(CudaExecutionContext& cuda, const KernelContext& ctx, const LtProduct& p, float alpha,
           const void* a, const void* b, const void* bias, const CudaFusedActivation& activation,
           void* d) const;

 private:
  ShapeCache<LtAlgorithm> cache_;
};

}  // namespace dprun
