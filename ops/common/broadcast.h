#pragma once
// numpy-style broadcasting shared by the elementwise kernels of every device: the strides of an
// input broadcast to an output, and an iteration over the output with their offsets.
#include <array>
#include <cstdint>
#include <vector>

#include "engine/execution_context.h"
#include "engine/shape.h"

namespace dprun {

/// Element strides of `shape` right-aligned to `out_rank` dims, 0 where the dim broadcasts.
inline std::vector<int64_t> broadcast_strides(const Shape& shape, size_t out_rank) {
  std::vector<int64_t> strides(out_rank, 0);
  int64_t stride = 1;
  for (size_t i = 0; i < shape.size(); ++i) {
    size_t src = shape.size() - 1 - i;
    size_t dst = out_rank - 1 - i;
    strides[dst] = shape[src] == 1 ? 0 : stride;
    stride *= shape[src];
  }
  return strides;
}

/// Calls fn(out_index, offsets...) for every element of `out_shape`, where offsets[k] is the
/// element offset into the k-th input broadcast to out_shape. Parallel over chunks.
template <size_t N, class Fn>
void for_each_broadcast(const ExecutionContext& exec, const Shape& out_shape,
                        const std::array<Shape, N>& in_shapes, Fn&& fn) {
  const size_t rank = out_shape.size();
  std::array<std::vector<int64_t>, N> strides;
  for (size_t k = 0; k < N; ++k) strides[k] = broadcast_strides(in_shapes[k], rank);
  const int64_t total = shape_numel(out_shape);
  exec.parallel_for(total, 1 << 14, [&](int64_t begin, int64_t end) {
    // Decompose `begin` into a multi-index, then walk with carries.
    std::vector<int64_t> index(rank, 0);
    std::array<int64_t, N> offsets{};
    int64_t rest = begin;
    for (size_t d = rank; d-- > 0;) {
      index[d] = rest % out_shape[d];
      rest /= out_shape[d];
      for (size_t k = 0; k < N; ++k) offsets[k] += index[d] * strides[k][d];
    }
    for (int64_t i = begin; i < end; ++i) {
      fn(i, offsets);
      for (size_t d = rank; d-- > 0;) {
        ++index[d];
        for (size_t k = 0; k < N; ++k) offsets[k] += strides[k][d];
        if (index[d] < out_shape[d]) break;
        for (size_t k = 0; k < N; ++k) offsets[k] -= strides[k][d] * out_shape[d];
        index[d] = 0;
      }
    }
  });
}

}  // namespace dprun
