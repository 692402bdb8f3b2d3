#pragma once
// The entry of the CUDA Transpose kernel, for other CUDA kernels that need a permuted copy of a
// device tensor (e.g. reductions over axes that are not adjacent).
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

}  // namespace dprun
