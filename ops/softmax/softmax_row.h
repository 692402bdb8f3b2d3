#pragma once
// One contiguous float32 row of Softmax as the CPU Softmax kernel computes it (vectorised per
// instruction set, the maximum subtracted first), for fused kernels that prepare the row
// themselves (the attention kernel scales and masks its scores first).
#include <cstdint>

namespace dprun {

/// y = Softmax(x) over D elements; y may be x.
void softmax_row(const float* x, float* y, int64_t D);

}  // namespace dprun
