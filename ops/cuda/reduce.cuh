#pragma once
// Warp and block reductions for CUDA kernels that reduce a row with one thread block (Softmax,
// the Reduce* family, LayerNormalization). `Op` is a device functor combining two values; it
// must be associative and commutative up to rounding, since the order of combination is the
// shuffle tree's, not the row's.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdint>

namespace dprun::cuda_reduce {

inline constexpr int kWarp = 32;
inline constexpr int kMaxThreads = 1024;
/// Scratch values block_reduce needs: one per warp of the largest block.
inline constexpr int kScratch = kMaxThreads / kWarp;

/// Combines v over the 32 lanes of a warp; every lane gets the result. T is a type
/// __shfl_xor_sync moves (32/64-bit integers, float, double).
template <class T, class Op>
__device__ T warp_reduce(T v, Op op) {
  for (int offset = kWarp / 2; offset > 0; offset /= 2)
    v = op(v, __shfl_xor_sync(0xffffffffu, v, offset));
  return v;
}

/// Combines v over the block (blockDim.x a multiple of 32); every thread gets the result.
/// `scratch` is shared memory for kScratch values; `identity` fills the lanes past the last
/// warp. Safe to call repeatedly with the same scratch.
template <class T, class Op>
__device__ T block_reduce(T v, T identity, Op op, T* scratch) {
  v = warp_reduce(v, op);
  const int lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp;
  __syncthreads();  // the previous reduction's readers are done with scratch
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  const int warps = blockDim.x / kWarp;
  return warp_reduce(lane < warps ? scratch[lane] : identity, op);
}

/// Threads for one block striding over a row of n elements: whole warps, no more than the row
/// needs, at most kMaxThreads.
inline int row_threads(int64_t n) {
  return static_cast<int>(std::clamp<int64_t>((n + kWarp - 1) / kWarp * kWarp, kWarp, kMaxThreads));
}

/// Grid sizes stay within gridDim.x's limit; kernels loop over what is left.
inline constexpr int64_t kMaxBlocks = int64_t{1} << 20;

inline unsigned grid_for(int64_t blocks) {
  return static_cast<unsigned>(std::clamp<int64_t>(blocks, 1, kMaxBlocks));
}

}  // namespace dprun::cuda_reduce
