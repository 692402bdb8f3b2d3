#pragma once
// The last step of the CUDA BatchNormalization kernels (training mode, batch_norm_training.cu;
// 16-bit inference, batch_norm_16bit.cu): y = x * a[c] + b[c] per channel of X seen as
// [N, C, S], in a's type with each multiply and add rounded on its own (no fused multiply-add,
// which the CPU's loop does not have either), a 16-bit y rounded once.
#include <cstdint>

#include "ops/cuda/elementwise.cuh"
#include "ops/cuda/half_convert.cuh"

namespace dprun::cuda_bn {

__device__ inline float mul_add_rounded(float x, float a, float b) {
  return __fadd_rn(__fmul_rn(x, a), b);
}
__device__ inline double mul_add_rounded(double x, double a, double b) {
  return __dadd_rn(__dmul_rn(x, a), b);
}

/// y = x * a[c] + b[c] over n elements; the channel is found in Index arithmetic (int32_t where
/// the element count allows: faster division).
template <class T, class A, class Index>
__global__ void apply_affine_kernel(const T* __restrict__ x, T* __restrict__ y,
                                    const A* __restrict__ a, const A* __restrict__ b, int64_t n,
                                    Index spatial, Index channels) {
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const Index c = static_cast<Index>(i) / spatial % channels;
    y[i] = cuda_half::store<T>(mul_add_rounded(static_cast<A>(cuda_half::load(x[i])), a[c], b[c]));
  }
}

/// apply_affine_kernel over X [N, C, S] (n elements) on the run's stream.
template <class T, class A>
void apply_affine(const KernelContext& ctx, const T* x, T* y, const A* a, const A* b, int64_t n,
                  int64_t spatial, int64_t channels) {
  if (n == 0) return;
  const cudaStream_t stream = cuda_ew::stream_of(ctx);
  if (cuda_ew::fits_32_bit_index(n))
    apply_affine_kernel<T, A, int32_t><<<cuda_ew::blocks_for(n), cuda_ew::kThreads, 0, stream>>>(
        x, y, a, b, n, static_cast<int32_t>(spatial), static_cast<int32_t>(channels));
  else
    apply_affine_kernel<T, A, int64_t><<<cuda_ew::blocks_for(n), cuda_ew::kThreads, 0, stream>>>(
        x, y, a, b, n, spatial, channels);
  cuda_ew::check_launch(ctx);
}

}  // namespace dprun::cuda_bn
