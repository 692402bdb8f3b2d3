// Gemm on CUDA (float32): Y = alpha * op(A) op(B) + beta * C, and FusedGemm, the op fusion's
// Gemm with the activation that read it (engine/rewrites/op_fusion.h). A C that is one row
// ([N] or [1, N], a linear layer's bias) added whole (beta = 1) is cuBLASLt's bias epilogue,
// added while the product is written (cublaslt_matmul.h). Any other C (or a row where cuBLASLt
// offers no algorithm), broadcast to [M, N] per ONNX unidirectional broadcasting (gemm_util.h),
// is first written into Y by a small kernel; then cublasSgemm accumulates the product onto it
// with beta (cublas_gemm.h).
#include <cuda_runtime_api.h>

#include "engine/backends/cuda/cuda_check.h"
#include "engine/backends/cuda/cuda_execution_context.h"
#include "engine/rewrites/rewrite_domain.h"
#include "ops/cpu/gemm_util.h"
#include "ops/cuda/cublas_gemm.h"
#include "ops/cuda/cublaslt_matmul.h"
#include "ops/cuda/fused_epilogue.h"

namespace dprun {
namespace {

/// y[i, j] = scale * c[i * row_stride + j * col_stride] over [m, n] (strides 0 broadcast).
__global__ void broadcast_c_kernel(const float* c, int64_t row_stride, int64_t col_stride,
                                   float scale, float* y, int64_t m, int64_t n) {
  const int64_t total = m * n;
  for (int64_t t = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; t < total;
       t += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t i = t / n, j = t % n;
    y[t] = scale * c[i * row_stride + j * col_stride];
  }
}

/// Whether C adds one row to every row of the [m, n] product, whole: cuBLASLt's bias.
bool is_row_bias(const Tensor* c, float beta, int64_t n) {
  if (c == nullptr || beta != 1.f || c->numel() != n) return false;
  return c->rank() == 1 || (c->rank() == 2 && c->shape()[0] == 1);
}

class GemmCuda : public OpKernel {
 public:
  /// Gemm, or FusedGemm with its "activation" (Gemm has none).
  explicit GemmCuda(const KernelInfo& info)
      : attrs_(info), tf32_(info.plan_options.allow_tf32), activation_(info.node) {}

  void compute(KernelContext& ctx) const override {
    const Tensor& a = ctx.input(0);
    const Tensor& b = ctx.input(1);
    const Tensor* c = ctx.optional_input(2);
    if (a.dtype() != DType::Float32) ctx.fail("expects float32 operands, got ", a.describe());
    const GemmShapes s = gemm_shapes(ctx, attrs_, a, b, c);
    Tensor& y = ctx.allocate_output(0, {s.m, s.n}, DType::Float32);
    if (y.numel() == 0) return;
    CudaExecutionContext& cuda = CudaExecutionContext::of(ctx.execution());
    if (s.k > 0 && is_row_bias(c, attrs_.beta, s.n) &&
        algorithms_.run(cuda, ctx,
                        {.trans_a = attrs_.trans_a,
                         .trans_b = attrs_.trans_b,
                         .tf32 = tf32_,
                         .m = s.m,
                         .n = s.n,
                         .k = s.k},
                        attrs_.alpha, a.data<float>(), b.data<float>(), c->data<float>(),
                        activation_, y.data<float>()))
      return;
    product(cuda, ctx, s, a, b, c, y);
    activation_.apply(ctx, y.data<float>(), y.numel());
  }

 private:
  /// Y = alpha * op(A) op(B) + beta * C on cuBLAS, C written into Y first.
  void product(CudaExecutionContext& cuda, const KernelContext& ctx, const GemmShapes& s,
               const Tensor& a, const Tensor& b, const Tensor* c, Tensor& y) const {
    // With beta == 0 cuBLAS does not read Y, so C need not be written into it.
    const bool add_c = c != nullptr && attrs_.beta != 0.f;
    // An empty inner dimension leaves Y = beta * C.
    const bool empty_sum = s.k == 0;
    if (add_c) {
      int64_t row_stride, col_stride;
      gemm_c_strides(c->shape(), s.m, s.n, row_stride, col_stride);
      constexpr int kThreads = 256;
      const int64_t blocks = std::min<int64_t>((y.numel() + kThreads - 1) / kThreads, 65535);
      broadcast_c_kernel<<<static_cast<unsigned>(blocks), kThreads, 0, cuda.stream()>>>(
          c->data<float>(), row_stride, col_stride, empty_sum ? attrs_.beta : 1.f, y.data<float>(),
          s.m, s.n);
      cuda_check(cudaGetLastError(), "Gemm: broadcast_c_kernel launch");
    } else if (empty_sum) {
      cuda_check(cudaMemsetAsync(y.raw_data(), 0, y.nbytes(), cuda.stream()),
                 "Gemm: cudaMemsetAsync");
    }
    if (empty_sum) return;
    const RowMajorGemm gemm{.trans_a = attrs_.trans_a,
                            .trans_b = attrs_.trans_b,
                            .tf32 = tf32_,
                            .m = s.m,
                            .n = s.n,
                            .k = s.k};
    gemm.run(cuda.cublas(), ctx, attrs_.alpha, a.data<float>(), b.data<float>(),
             add_c ? attrs_.beta : 0.f, y.data<float>());
  }

  GemmAttrs attrs_;
  bool tf32_;
  CudaFusedActivation activation_;
  LtAlgorithms algorithms_;
};

DPRUN_REGISTER_KERNEL({.op_type = "Gemm",
                       .since = 1,
                       .device = DeviceType::CUDA,
                       .dtypes = {DType::Float32},
                       .factory = make_kernel<GemmCuda>});
DPRUN_REGISTER_KERNEL({.domain = kRewriteDomain,
                       .op_type = "FusedGemm",
                       .device = DeviceType::CUDA,
                       .dtypes = {DType::Float32},
                       .impl = "cublaslt",
                       .factory = make_kernel<GemmCuda>});

}  // namespace
}  // namespace dprun
