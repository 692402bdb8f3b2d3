#pragma once
// What AveragePool on CUDA does around cuDNN where the windows are not all counted alike
// (ops/pool/pool_cuda.cpp's explicit padding): 16-bit inputs are pooled in float32, and each
// window's average over the whole window is scaled to ONNX's count before the one rounding.
#include <cstdint>

#include "engine/kernel.h"

namespace dprun {

/// A float32 copy of the float16 or bfloat16 device tensor `x`, on the run's stream (exact).
Tensor widened_to_float32(const KernelContext& ctx, const Tensor& x);

/// y[i] = sum[i] * factor[i % positions], rounded once to y's dtype (float32, float16 or
/// bfloat16), for every element of y; `sum` and `factor` are float32 device memory. Queued on the
/// run's stream.
void scale_positions_into(const KernelContext& ctx, const float* sum, const float* factor,
                          int64_t positions, Tensor& y);

}  // namespace dprun
