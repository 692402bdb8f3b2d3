#pragma once
// The CPU's moments of normalization kernels, vectorised with simd_loops.h. What the
// reduction, normalization and sorting kernels of every device share is in
// ops/common/reduce_common.h.
#include <cstdint>
#include <type_traits>
#include <utility>

#include "ops/common/reduce_common.h"
#include "ops/cpu/simd_loops.h"

namespace dprun {

/// Mean and population variance of `rows` rows of `width` values, `stride` apart (one channel
/// of [N, C, S] data: rows N, stride C * S, width S), accumulated in double in two passes, so
/// that values with a large mean keep their precision. float and double rows run vectorized.
template <class T>
std::pair<double, double> strided_moments(const T* x, int64_t rows, int64_t stride, int64_t width) {
  const int64_t count = rows * width;
  if (count == 0) return {0.0, 0.0};
  constexpr bool kSimd = std::is_same_v<T, float> || std::is_same_v<T, double>;
  double sum = 0;
  for (int64_t r = 0; r < rows; ++r) {
    const T* row = x + r * stride;
    if constexpr (kSimd) {
      sum += simd::sum_in_double(row, width);
    } else {
      for (int64_t i = 0; i < width; ++i) sum += load_as<double>(row[i]);
    }
  }
  const double mean = sum / static_cast<double>(count);
  double sq = 0;
  for (int64_t r = 0; r < rows; ++r) {
    const T* row = x + r * stride;
    if constexpr (kSimd) {
      sq += simd::squared_deviations(row, mean, width);
    } else {
      for (int64_t i = 0; i < width; ++i) {
        const double d = load_as<double>(row[i]) - mean;
        sq += d * d;
      }
    }
  }
  return {mean, sq / static_cast<double>(count)};
}

/// Mean and population variance of a contiguous row (strided_moments of one row).
template <class T>
std::pair<double, double> row_moments(const T* x, int64_t n) {
  return strided_moments(x, 1, n, n);
}

}  // namespace dprun
