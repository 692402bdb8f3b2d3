#pragma once
// Inference BatchNormalization as a per-channel affine map, y = x * a[c] + b[c], with
// a = scale / sqrt(var + epsilon) and b = B - mean * a: shared by the channels-last kernels so
// that a fused and an unfused normalization give the same bits.
#include <cmath>
#include <cstdint>
#include <vector>

#include "engine/kernel.h"

namespace dprun {

/// a and b from the inputs scale, B, mean and var at `first`, first + 1, ... (each `c` values of
/// dtype T, checked by the caller).
template <class T>
void batch_norm_affine(const KernelContext& ctx, size_t first, int64_t c, float epsilon,
                       std::vector<T>& a, std::vector<T>& b) {
  const T* scale = ctx.input(first).data<T>();
  const T* bias = ctx.input(first + 1).data<T>();
  const T* mean = ctx.input(first + 2).data<T>();
  const T* var = ctx.input(first + 3).data<T>();
  a.resize(static_cast<size_t>(c));
  b.resize(static_cast<size_t>(c));
  for (int64_t k = 0; k < c; ++k) {
    a[k] = scale[k] / std::sqrt(var[k] + static_cast<T>(epsilon));
    b[k] = bias[k] - mean[k] * a[k];
  }
}

}  // namespace dprun
