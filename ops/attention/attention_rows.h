#pragma once
// The per-row work of the attention kernels, between their products, on one row of scores of n
// floats while it is in cache; vectorised per instruction set (engine/simd_clones.h), a mask
// read with step 1 (or 0, broadcast) taking the contiguous loop.
#include <cstdint>

namespace dprun::attention {

/// y = y * scale, plus m (read at steps of `step`) when m is not null.
void scale_scores(float* y, int64_t n, float scale, const float* m, int64_t step);

/// y = fill where c (read at steps of `step`) equals `where`, else y * scale.
void fill_scores(float* y, int64_t n, float scale, const bool* c, int64_t step, bool where,
                 float fill);

/// d = scale * p * (d - sum(p * d)): a row of dP becomes dS; then 0 where c (when not null, read
/// at steps of `step`) equals `where`.
void score_gradient(const float* p, float* d, int64_t n, float scale, const bool* c, int64_t step,
                    bool where);

}  // namespace dprun::attention
