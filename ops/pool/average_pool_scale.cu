#include "ops/pool/average_pool_scale_cuda.h"

#include "ops/cuda/elementwise.cuh"
#include "ops/cuda/half_convert.cuh"

namespace dprun {
namespace {

template <class T>
__global__ void widen_kernel(const T* __restrict__ x, float* __restrict__ y, int64_t n) {
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    y[i] = cuda_half::load(x[i]);
}

template <class T>
__global__ void scale_kernel(const float* __restrict__ sum, const float* __restrict__ factor,
                             int64_t positions, T* __restrict__ y, int64_t n) {
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    y[i] = cuda_half::store<T>(sum[i] * factor[i % positions]);
}

}  // namespace

Tensor widened_to_float32(const KernelContext& ctx, const Tensor& x) {
  Tensor y = Tensor::empty(x.shape(), DType::Float32, ctx.device());
  const int64_t n = x.numel();
  if (n == 0) return y;
  visit_dtype_among<Float16, BFloat16>(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    widen_kernel<<<cuda_ew::blocks_for(n), cuda_ew::kThreads, 0, cuda_ew::stream_of(ctx)>>>(
        static_cast<const T*>(x.raw_data()), y.data<float>(), n);
  });
  cuda_ew::check_launch(ctx);
  return y;
}

void scale_positions_into(const KernelContext& ctx, const float* sum, const float* factor,
                          int64_t positions, Tensor& y) {
  const int64_t n = y.numel();
  if (n == 0) return;
  visit_dtype_among<float, Float16, BFloat16>(y.dtype(), [&](auto tag) {
    using T = decltype(tag);
    scale_kernel<<<cuda_ew::blocks_for(n), cuda_ew::kThreads, 0, cuda_ew::stream_of(ctx)>>>(
        sum, factor, positions, static_cast<T*>(y.raw_data()), n);
  });
  cuda_ew::check_launch(ctx);
}

}  // namespace dprun
