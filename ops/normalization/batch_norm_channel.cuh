#pragma once
// The elements of one channel of X [N, C, S] for the thread blocks of the batch normalization
// kernels that give each channel a block (batch_norm_training.cu, batch_norm_training_grad.cu).
#include <cstdint>

namespace dprun::cuda_bn {

/// The sum of two doubles, for block_reduce (ops/cuda/reduce.cuh).
struct DoubleSum {
  __device__ double operator()(double a, double b) const { return a + b; }
};

/// Calls f(offset) for this thread's elements of one channel of X seen as [N, C, S] (elements
/// threadIdx.x, threadIdx.x + blockDim.x, ... in (n, s) order), the offset being from the
/// channel's first element. Each step adds blockDim.x to (n, s) with one carry, so the loop
/// does not divide per element.
template <class F>
__device__ inline void for_channel_elements(int64_t N, int64_t C, int64_t S, F&& f) {
  const int64_t count = N * S;
  if (count == 0) return;
  const int64_t row = C * S;  // from (n, s) to (n + 1, s)
  const int64_t step_n = blockDim.x / S, step_s = blockDim.x % S;
  int64_t s = threadIdx.x % S;
  int64_t offset = threadIdx.x / S * row + s;
  for (int64_t i = threadIdx.x; i < count; i += blockDim.x) {
    f(offset);
    s += step_s;
    offset += step_n * row + step_s;
    if (s >= S) {
      s -= S;
      offset += row - S;
    }
  }
}

}  // namespace dprun::cuda_bn
