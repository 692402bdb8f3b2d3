#pragma once
// The entries of the CUDA Transpose kernel, for other CUDA kernels that need a permuted copy of
// a device tensor (e.g. reductions over axes that are not adjacent) or a broadcast one.
#include <cstdint>
#include <vector>

#include "engine/kernel.h"

namespace dprun {

/// Queues, on the run's stream, the copy of `x` with its dimensions permuted by `perm` (a
/// permutation of x's dims, already validated) into `y`: a tensor on the run's device with x's
/// dtype and element count, whose shape is not read. Fails naming the node when the permuted
/// layout needs more than 8 dimensions after merging.
void cuda_transpose_into(const KernelContext& ctx, const Tensor& x,
                         const std::vector<int64_t>& perm, Tensor& y);

/// Queues, on the run's stream, y[i] = x[offset(i)] for every i of `dims` (row-major, outermost
/// first), offset(i) being the sum over dims of i's index times `in_strides` there; a stride
/// of 0 repeats x along that dim (a broadcast). `y` is a tensor on the run's device with x's
/// dtype and the product of `dims` elements. Fails naming the node beyond 8 dims.
void cuda_gather_strided(const KernelContext& ctx, const Tensor& x,
                         const std::vector<int64_t>& dims, const std::vector<int64_t>& in_strides,
                         Tensor& y);

}  // namespace dprun
