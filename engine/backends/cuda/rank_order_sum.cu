#include "engine/backends/cuda/rank_order_sum.h"

#include <algorithm>

#include "engine/backends/cuda/cuda_check.h"

namespace dprun {

namespace {

template <class T>
__global__ void sum_in_rank_order(T* out, const T* parts, int64_t count, int ranks) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count;
       i += stride) {
    T sum = parts[i];
    for (int r = 1; r < ranks; ++r) sum += parts[static_cast<int64_t>(r) * count + i];
    out[i] = sum;
  }
}

template <class T>
void launch(void* out, const void* parts, int64_t count, int ranks, cudaStream_t stream) {
  constexpr int kThreads = 256;
  // A grid-stride loop: enough blocks to fill the GPU without reaching the grid limit.
  const int64_t blocks = std::min<int64_t>((count + kThreads - 1) / kThreads, 65535);
  sum_in_rank_order<T><<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(
      static_cast<T*>(out), static_cast<const T*>(parts), count, ranks);
  cuda_check(cudaGetLastError(), "rank-order sum of ", ranks, " parts of ", count,
             " elements: kernel launch");
}

}  // namespace

void sum_parts_in_rank_order(void* out, const void* parts, int64_t count, int ranks, DType dtype,
                             cudaStream_t stream) {
  if (count == 0) return;
  if (dtype == DType::Float32)
    launch<float>(out, parts, count, ranks, stream);
  else if (dtype == DType::Float64)
    launch<double>(out, parts, count, ranks, stream);
  else
    fail("rank-order sum on a GPU: only float32 and float64 tensors, not ", dtype_name(dtype));
}

}  // namespace dprun
