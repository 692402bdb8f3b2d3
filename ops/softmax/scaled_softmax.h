#pragma once
// Softmax as the CPU Softmax kernel computes it, each row times a factor of its own, for fused
// kernels that scale the probabilities in the same pass (the cross-entropy loss's gradient).
#include <cstdint>

#include "engine/kernel.h"

namespace dprun {

/// y = Softmax of x along D, both viewed as [outer, D, inner] (softmax_util.h), times
/// scale[o * inner + i] for every element of row (o, i); each row shifted by its maximum.
/// T is float or double. y may be x (each element is read before it is written), not a
/// shifted view of it.
template <class T>
void scaled_softmax(const ExecutionContext& exec, const T* x, const T* scale, T* y, int64_t outer,
                    int64_t D, int64_t inner);

}  // namespace dprun
