#pragma once
// Helpers shared by the reduction/normalization kernel tests: random inputs, index
// arithmetic and tolerant comparison.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "engine/tensor.h"

namespace dprun::reduce_norm_test {

inline std::vector<float> random_values(int64_t n, uint32_t seed, float lo = -2.f, float hi = 2.f) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(static_cast<size_t>(n));
  for (auto& x : v) x = dist(gen);
  return v;
}

inline Tensor random_tensor(const Shape& shape, uint32_t seed, float lo = -2.f, float hi = 2.f) {
  return Tensor::from_vector<float>(shape, random_values(shape_numel(shape), seed, lo, hi));
}

inline void expect_close(const Tensor& got, const Shape& shape, const std::vector<double>& want,
                         double tol = 1e-5) {
  ASSERT_EQ(shape_to_string(got.shape()), shape_to_string(shape));
  ASSERT_EQ(got.numel(), static_cast<int64_t>(want.size()));
  for (size_t i = 0; i < want.size(); ++i) {
    const double g = got.item_as_double(static_cast<int64_t>(i));
    if (std::isnan(want[i])) {
      EXPECT_TRUE(std::isnan(g)) << "at " << i;
    } else if (std::isinf(want[i])) {
      EXPECT_EQ(g, want[i]) << "at " << i;
    } else {
      EXPECT_NEAR(g, want[i], tol * (1 + std::abs(want[i]))) << "at " << i;
    }
  }
}

/// Multi-index of flat index i in shape.
inline std::vector<int64_t> unravel(int64_t i, const Shape& shape) {
  std::vector<int64_t> idx(shape.size());
  for (size_t d = shape.size(); d-- > 0;) {
    idx[d] = i % shape[d];
    i /= shape[d];
  }
  return idx;
}

inline int64_t ravel(const std::vector<int64_t>& idx, const Shape& shape) {
  int64_t off = 0;
  for (size_t d = 0; d < shape.size(); ++d) off = off * shape[d] + idx[d];
  return off;
}

/// Product of shape[begin, end).
inline int64_t dims_product_test(const Shape& shape, int64_t begin, int64_t end) {
  int64_t p = 1;
  for (int64_t i = begin; i < end; ++i) p *= shape[static_cast<size_t>(i)];
  return p;
}

}  // namespace dprun::reduce_norm_test
