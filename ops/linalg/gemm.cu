// The compute of the CUDA Gemm and FusedGemm (defined in ops/linalg/gemm_cuda_def.cpp):
// Y = alpha * op(A) op(B) + beta * C, in float32, float16 and bfloat16; FusedGemm is the op
// fusion's Gemm with the activation that read it (engine/rewrites/op_fusion.h). A C that is one
// row ([N] or [1, N], a linear layer's bias) added whole (beta = 1) is cuBLASLt's bias epilogue,
// added while the product is written (cublaslt_matmul_cuda.h). Any other C (or a row where cuBLASLt
// offers no algorithm), broadcast to [M, N] per ONNX unidirectional broadcasting (gemm_util.h), is
// first written into Y by a small kernel; then cuBLAS accumulates the product onto it with beta
// (cublas_gemm_cuda.h). In 16 bits C is copied into Y exactly and cuBLAS sums alpha * AB + beta * C
// in float32, rounding Y once, as the CPU's 16-bit Gemm does.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <string>

#include "engine/backends/cuda/cuda_check.h"
#include "engine/backends/cuda/cuda_execution_context.h"
#include "ops/cuda/defs/cuda_compute.h"
#include "ops/cuda/half_convert.cuh"
#include "ops/input_dtypes.h"
#include "ops/linalg/cublas_gemm_cuda.h"
#include "ops/linalg/cublaslt_matmul_cuda.h"
#include "ops/linalg/fused_epilogue_cuda.h"
#include "ops/linalg/gemm_util.h"

namespace dprun {
namespace {

/// y[i, j] = scale * c[i * row_stride + j * col_stride] over [m, n] (strides 0 broadcast),
/// computed in float and stored in T (exact for a 16-bit T when scale is 1).
template <class T>
__global__ void broadcast_c_kernel(const T* c, int64_t row_stride, int64_t col_stride, float scale,
                                   T* y, int64_t m, int64_t n) {
  const int64_t total = m * n;
  for (int64_t t = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; t < total;
       t += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t i = t / n, j = t % n;
    y[t] = cuda_half::store<T>(
        scale * static_cast<float>(cuda_half::load(c[i * row_stride + j * col_stride])));
  }
}

/// broadcast_c_kernel for Y's element type (float32, float16 or bfloat16), on the run's stream.
void broadcast_c(CudaExecutionContext& cuda, const Tensor& c, int64_t row_stride,
                 int64_t col_stride, float scale, Tensor& y, int64_t m, int64_t n) {
  constexpr int kThreads = 256;
  const auto blocks =
      static_cast<unsigned>(std::min<int64_t>((y.numel() + kThreads - 1) / kThreads, 65535));
  const auto launch = [&](auto tag) {
    using T = decltype(tag);
    broadcast_c_kernel<T><<<blocks, kThreads, 0, cuda.stream()>>>(
        static_cast<const T*>(c.raw_data()), row_stride, col_stride, scale,
        static_cast<T*>(y.raw_data()), m, n);
  };
  if (y.dtype() == DType::Float16)
    launch(Float16{});
  else if (y.dtype() == DType::BFloat16)
    launch(BFloat16{});
  else
    launch(float{});
  cuda_check(cudaGetLastError(), "Gemm: broadcast_c_kernel launch");
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
    const DType dtype = a.dtype();
    if (dtype != DType::Float32 && !is_16bit_float(dtype))
      ctx.fail("expects float32, float16 or bfloat16 operands, got ", a.describe());
    check_one_dtype(ctx, "A, B and C", 3);
    const GemmShapes s = gemm_shapes(ctx, attrs_, a, b, c);
    Tensor& y = ctx.allocate_output(0, {s.m, s.n}, dtype);
    if (y.numel() == 0) return;
    CudaExecutionContext& cuda = CudaExecutionContext::of(ctx.execution());
    if (s.k > 0 && is_row_bias(c, attrs_.beta, s.n) &&
        algorithms_.run(cuda, ctx,
                        {.dtype = dtype,
                         .trans_a = attrs_.trans_a,
                         .trans_b = attrs_.trans_b,
                         .tf32 = tf32_,
                         .m = s.m,
                         .n = s.n,
                         .k = s.k},
                        attrs_.alpha, a.raw_data(), b.raw_data(), c->raw_data(), activation_,
                        y.raw_data()))
      return;
    product(cuda, ctx, s, a, b, c, y);
    activation_.apply(ctx, y.raw_data(), dtype, y.numel());  // FusedGemm's; Gemm has none
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
      broadcast_c(cuda, *c, row_stride, col_stride, empty_sum ? attrs_.beta : 1.f, y, s.m, s.n);
    } else if (empty_sum) {
      cuda_check(cudaMemsetAsync(y.raw_data(), 0, y.nbytes(), cuda.stream()),
                 "Gemm: cudaMemsetAsync");
    }
    if (empty_sum) return;
    const RowMajorGemm gemm{.type = cublas_type(y.dtype(), ctx),
                            .trans_a = attrs_.trans_a,
                            .trans_b = attrs_.trans_b,
                            .tf32 = tf32_,
                            .m = s.m,
                            .n = s.n,
                            .k = s.k};
    gemm.run(cuda.cublas(), ctx, attrs_.alpha, a.raw_data(), b.raw_data(),
             add_c ? attrs_.beta : 0.f, y.raw_data());
  }

  GemmAttrs attrs_;
  bool tf32_;
  CudaFusedActivation activation_;
  LtAlgorithms algorithms_;
};

DPRUN_CUDA_COMPUTE("Gemm", make_kernel<GemmCuda>);
DPRUN_CUDA_COMPUTE("dprun::FusedGemm", make_kernel<GemmCuda>);

}  // namespace
}  // namespace dprun
