// Gemm on CUDA (float32): Y = alpha * op(A) op(B) + beta * C. C, broadcast to [M, N] per ONNX
// unidirectional broadcasting (gemm_util.h), is first written into Y by a small kernel; then
// cublasSgemm accumulates the product onto it with beta (cublas_gemm.h).
#include <cuda_runtime_api.h>

#include "engine/backends/cuda/cuda_check.h"
#include "engine/backends/cuda/cuda_execution_context.h"
#include "ops/cpu/gemm_util.h"
#include "ops/cuda/cublas_gemm.h"

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

class GemmCuda : public OpKernel {
 public:
  explicit GemmCuda(const KernelInfo& info) : attrs_(info), tf32_(info.plan_options.allow_tf32) {}

  void compute(KernelContext& ctx) const override {
    const Tensor& a = ctx.input(0);
    const Tensor& b = ctx.input(1);
    const Tensor* c = ctx.optional_input(2);
    if (a.dtype() != DType::Float32) ctx.fail("expects float32 operands, got ", a.describe());
    const GemmShapes s = gemm_shapes(ctx, attrs_, a, b, c);
    Tensor& y = ctx.allocate_output(0, {s.m, s.n}, DType::Float32);
    if (y.numel() == 0) return;
    CudaExecutionContext& cuda = CudaExecutionContext::of(ctx.execution());
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
    const RowMajorSgemm gemm{.trans_a = attrs_.trans_a,
                             .trans_b = attrs_.trans_b,
                             .tf32 = tf32_,
                             .m = s.m,
                             .n = s.n,
                             .k = s.k};
    gemm.run(cuda.cublas(), ctx, attrs_.alpha, a.data<float>(), b.data<float>(),
             add_c ? attrs_.beta : 0.f, y.data<float>());
  }

 private:
  GemmAttrs attrs_;
  bool tf32_;
};

DPRUN_REGISTER_KERNEL({.op_type = "Gemm",
                       .since = 1,
                       .device = DeviceType::CUDA,
                       .dtypes = {DType::Float32},
                       .factory = make_kernel<GemmCuda>});

}  // namespace
}  // namespace dprun
