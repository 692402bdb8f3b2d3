#pragma once
// What the CUDA kernels of fused products (MatMulBias, FusedGemm; engine/rewrites/op_fusion.h)
// do around the product: the activation fused into them, applied in place where cuBLASLt's
// epilogue cannot (it has Relu, but its GELU is the tanh approximation and it has no sigmoid,
// SiLU or clip), and the rows of bias an empty sum leaves.
#include <cstdint>

#include "engine/graph.h"
#include "engine/kernel.h"
#include "ops/math/fused_activation_kind.h"

namespace dprun {

/// A fused product's activation (every kind of fused_activation_kinds()) on float32, float16
/// or bfloat16 device memory.
struct CudaFusedActivation : FusedActivationAttrs {
  using FusedActivationAttrs::FusedActivationAttrs;

  /// data[i] = activation(data[i]) for i < n, elements of `dtype`, on the run's stream; nothing
  /// for None. A 16-bit element is widened, computed in float and rounded once more.
  void apply(const KernelContext& ctx, void* data, DType dtype, int64_t n) const;
};

/// y[r, j] = bias[j] for every row r < rows and column j < cols, both of `dtype` (float32,
/// float16 or bfloat16), on the run's stream.
void write_bias_rows(const KernelContext& ctx, const void* bias, void* y, DType dtype, int64_t rows,
                     int64_t cols);

}  // namespace dprun
