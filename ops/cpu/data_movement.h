#pragma once
// The CPU's type-agnostic strided copies, which move elements by byte size on the run's
// threads (ops/cpu/data_movement.cpp). What every device shares of the shape and data-movement
// kernels (integer inputs, strided views) is in ops/common/data_movement.h.
#include <cstdint>
#include <vector>

#include "engine/kernel.h"
#include "ops/common/data_movement.h"

namespace dprun {

/// Copies a strided view of `src` into the contiguous buffer `dst` on exec's threads: dst element
/// with multi-index (i_0..i_n) of `out_shape` is src[offset + sum i_k * src_strides[k]] (element
/// strides, possibly negative or zero). Dims are merged where possible; a unit innermost
/// stride becomes memcpy of rows, a transposed innermost dim is copied in cache tiles.
void strided_copy(const ExecutionContext& exec, const void* src, int64_t src_offset,
                  Shape out_shape, std::vector<int64_t> src_strides, void* dst, size_t elem_size);

/// ViewCopyKernel's copy on the CPU: strided_copy on the node's threads.
void cpu_view_copy(const KernelContext& ctx, const Tensor& x, const StridedView& view, Tensor& y);

/// Copies `src` (contiguous, shape `in_shape`) into `dst` permuted: out dim k is in dim perm[k].
void permute_copy(const ExecutionContext& exec, const void* src, const Shape& in_shape,
                  const std::vector<int64_t>& perm, void* dst, size_t elem_size);

}  // namespace dprun
