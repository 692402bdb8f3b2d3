#pragma once
// LogSoftmax as the CPU LogSoftmax kernel computes it, for other kernels that need
// log-probabilities (SoftmaxCrossEntropyLoss).
#include <cstdint>

#include "engine/kernel.h"

namespace dprun {

/// y = LogSoftmax of x along D, both viewed as [outer, D, inner] (softmax_util.h): contiguous
/// rows when inner == 1, blocks of the inner dim otherwise; each row shifted by its maximum.
/// T is float, double, Float16 or BFloat16 (16-bit rows computed in float32). y may not
/// overlap x.
template <class T>
void log_softmax(const ExecutionContext& exec, const T* x, T* y, int64_t outer, int64_t D,
                 int64_t inner);

}  // namespace dprun
