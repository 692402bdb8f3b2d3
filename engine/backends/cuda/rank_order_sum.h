#pragma once
// The sum of an all-gathered tensor's parts in rank order, on a GPU: what an NCCL process group's
// deterministic all-reduce computes after its ncclAllGather.
#include <cuda_runtime_api.h>

#include <cstdint>

#include "engine/dtype.h"

namespace dprun {

/// out[i] = ((parts[i] + parts[count + i]) + parts[2 count + i]) + ... over `ranks` parts of
/// `count` elements each, in `dtype` (float32 or float64), queued on `stream` of the current
/// GPU. Each addition rounds on its own, as the host's add_in_place. Throws Error for another
/// dtype or a failed launch.
void sum_parts_in_rank_order(void* out, const void* parts, int64_t count, int ranks, DType dtype,
                             cudaStream_t stream);

}  // namespace dprun
