#pragma once
// The copy behind the CUDA data-movement kernels (Concat, Split, Slice, Expand, Tile): one
// elementwise move between two strided layouts of device memory, queued on the run's stream.
#include <cstdint>
#include <vector>

#include "ops/common/data_movement.h"

namespace dprun {

/// The most dimensions a copy may have after size-1 dims are dropped and neighbours that are
/// contiguous in both layouts are merged (Tile's views have twice the input's rank).
inline constexpr int kMaxStridedCopyRank = 16;

/// Queues on the run's stream, for every multi-index i of `shape`:
///   dst[dst_offset + sum i_k * dst_strides[k]] = src[src_offset + sum i_k * src_strides[k]]
/// Offsets and strides count elements of `elem_size` bytes (1, 2, 4 or 8); src strides may be
/// zero (repeats) or negative (reversals). Both pointers are device memory of ctx's GPU;
/// destinations must not overlap. A copy contiguous in both layouts is one
/// cudaMemcpyAsync. Fails naming the node beyond kMaxStridedCopyRank merged dims. Returns
/// without waiting.
void cuda_strided_copy(const KernelContext& ctx, const Shape& shape, const void* src,
                       int64_t src_offset, const std::vector<int64_t>& src_strides, void* dst,
                       int64_t dst_offset, const std::vector<int64_t>& dst_strides,
                       size_t elem_size);

/// ViewCopyKernel's copy on CUDA (Slice, Expand, Tile): the view of x into the contiguous y
/// (y's shape is not read; it holds the view's element count).
void cuda_view_copy(const KernelContext& ctx, const Tensor& x, const StridedView& view, Tensor& y);

}  // namespace dprun
