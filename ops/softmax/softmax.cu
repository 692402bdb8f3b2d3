// The compute of the CUDA Softmax and LogSoftmax (defined in ops/softmax/softmax_cuda_def.cpp;
// float32, float16, bfloat16: 16-bit values computed in float, each result rounded once), over the
// [outer, D, inner] view of the input (softmax_util.h: one axis from opset 13, the 2-D coercion
// before). Numerically stable: the maximum along D is subtracted before exponentiating.
//
// Contiguous rows (inner == 1, the usual last-axis case): one block per row, its threads
// striding over the row, so rows of any length fit; max and sum are block reductions. Strided
// rows (inner > 1): one thread per (outer, inner) column, neighbouring threads reading
// neighbouring addresses.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>

#include "engine/backends/cuda/cuda_check.h"
#include "engine/backends/cuda/cuda_execution_context.h"
#include "ops/cuda/defs/cuda_compute.h"
#include "ops/cuda/half_convert.cuh"
#include "ops/cuda/reduce.cuh"
#include "ops/softmax/softmax_util.h"

namespace dprun {
namespace {

using cuda_half::load;
using cuda_half::store;
using cuda_reduce::block_reduce;
using cuda_reduce::kWarp;

struct MaxOp {
  __device__ float operator()(float a, float b) const { return fmaxf(a, b); }
};
struct SumOp {
  __device__ float operator()(float a, float b) const { return a + b; }
};

template <bool kLog, class T>
__global__ void softmax_rows_kernel(const T* x, T* y, int64_t rows, int64_t d) {
  __shared__ float scratch[cuda_reduce::kScratch];
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T* xr = x + r * d;
    T* yr = y + r * d;
    float mx = -INFINITY;
    for (int64_t j = threadIdx.x; j < d; j += blockDim.x) mx = fmaxf(mx, load(xr[j]));
    mx = block_reduce(mx, -INFINITY, MaxOp{}, scratch);
    float sum = 0.f;
    for (int64_t j = threadIdx.x; j < d; j += blockDim.x) sum += expf(load(xr[j]) - mx);
    sum = block_reduce(sum, 0.f, SumOp{}, scratch);
    if constexpr (kLog) {
      const float shift = mx + logf(sum);
      for (int64_t j = threadIdx.x; j < d; j += blockDim.x) yr[j] = store<T>(load(xr[j]) - shift);
    } else {
      const float inv = 1.f / sum;
      for (int64_t j = threadIdx.x; j < d; j += blockDim.x)
        yr[j] = store<T>(expf(load(xr[j]) - mx) * inv);
    }
  }
}

template <bool kLog, class T>
__global__ void softmax_columns_kernel(const T* x, T* y, int64_t outer, int64_t d, int64_t inner) {
  const int64_t columns = outer * inner;
  for (int64_t t = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; t < columns;
       t += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t base = (t / inner) * d * inner + t % inner;
    const T* xc = x + base;
    T* yc = y + base;
    float mx = -INFINITY;
    for (int64_t j = 0; j < d; ++j) mx = fmaxf(mx, load(xc[j * inner]));
    float sum = 0.f;
    for (int64_t j = 0; j < d; ++j) sum += expf(load(xc[j * inner]) - mx);
    if constexpr (kLog) {
      const float shift = mx + logf(sum);
      for (int64_t j = 0; j < d; ++j) yc[j * inner] = store<T>(load(xc[j * inner]) - shift);
    } else {
      const float inv = 1.f / sum;
      for (int64_t j = 0; j < d; ++j)
        yc[j * inner] = store<T>(expf(load(xc[j * inner]) - mx) * inv);
    }
  }
}

/// Grid sizes stay within gridDim.x's limit; the kernels loop over what is left.
constexpr int64_t kMaxBlocks = 1 << 20;

template <bool kLog>
class SoftmaxCuda : public OpKernel {
 public:
  explicit SoftmaxCuda(const KernelInfo& info) : axis_(info) {}

  void compute(KernelContext& ctx) const override {
    const Tensor& x = ctx.input(0);
    const SoftmaxDims s = axis_.dims(ctx, x.shape());
    Tensor& y = ctx.allocate_output(0, x.shape(), x.dtype());
    if (x.numel() == 0) return;
    if (x.dtype() == DType::Float32)
      launch<float>(ctx, x, y, s);
    else if (x.dtype() == DType::Float16)
      launch<Float16>(ctx, x, y, s);
    else if (x.dtype() == DType::BFloat16)
      launch<BFloat16>(ctx, x, y, s);
    else
      ctx.fail("expects float32, float16 or bfloat16, got ", x.describe());
  }

 private:
  template <class T>
  static void launch(KernelContext& ctx, const Tensor& x, Tensor& y, const SoftmaxDims& s) {
    const cudaStream_t stream = CudaExecutionContext::of(ctx.execution()).stream();
    const T* xp = static_cast<const T*>(x.raw_data());
    T* yp = static_cast<T*>(y.raw_data());
    if (s.inner == 1) {
      // Whole warps, no more than the row needs.
      const int threads = cuda_reduce::row_threads(s.d);
      const auto blocks = static_cast<unsigned>(std::min(s.outer, kMaxBlocks));
      softmax_rows_kernel<kLog, T><<<blocks, threads, 0, stream>>>(xp, yp, s.outer, s.d);
      cuda_check(cudaGetLastError(), "softmax_rows_kernel launch");
    } else {
      constexpr int kThreads = 256;
      const auto blocks = static_cast<unsigned>(
          std::min((s.outer * s.inner + kThreads - 1) / kThreads, kMaxBlocks));
      softmax_columns_kernel<kLog, T>
          <<<blocks, kThreads, 0, stream>>>(xp, yp, s.outer, s.d, s.inner);
      cuda_check(cudaGetLastError(), "softmax_columns_kernel launch");
    }
  }

  SoftmaxAxis axis_;
};

DPRUN_CUDA_COMPUTE("Softmax", make_kernel<SoftmaxCuda<false>>);
DPRUN_CUDA_COMPUTE("LogSoftmax", make_kernel<SoftmaxCuda<true>>);

}  // namespace
}  // namespace dprun
