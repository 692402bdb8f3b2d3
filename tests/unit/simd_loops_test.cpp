// The per-instruction-set float32 loops (ops/cpu/simd_loops.h) against double-precision
// references: whichever clone this CPU selects, the vectorised math stays within its stated
// error, keeps NaN and infinities, and handles lengths that are not a multiple of the vector
// width (the tails), in place too.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "ops/cpu/simd_loops.h"
#include "ops/math/binary_functors.h"
#include "ops/math/unary_functors.h"

namespace dprun {
namespace {

// Distance in units in the last place between two finite floats of the same sign region.
int64_t ulp_distance(float a, float b) {
  auto ordered = [](float v) {
    int32_t i;
    std::memcpy(&i, &v, sizeof i);
    return i < 0 ? int64_t(INT32_MIN) - i : int64_t(i);
  };
  return std::llabs(ordered(a) - ordered(b));
}

std::vector<float> grid(float lo, float hi, int64_t n) {
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i)
    v[static_cast<size_t>(i)] = lo + (hi - lo) * static_cast<float>(i) / static_cast<float>(n - 1);
  return v;
}

template <class F>
int64_t max_ulp(const F& f, double (*reference)(double), const std::vector<float>& x) {
  std::vector<float> y(x.size());
  simd::map(f, x.data(), y.data(), static_cast<int64_t>(x.size()));
  int64_t worst = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    const float want = static_cast<float>(reference(x[i]));
    worst = std::max(worst, ulp_distance(y[i], want));
  }
  return worst;
}

double sigmoid(double x) {
  return 1 / (1 + std::exp(-x));
}

double silu(double x) {
  return x / (1 + std::exp(-x));
}

TEST(SimdLoops, TranscendentalsStayWithinTheirStatedError) {
  // 100003 points: not a multiple of 8 or 16, so every clone's tail runs too.
  const std::vector<float> x = grid(-9.f, 9.f, 100003);
  EXPECT_LE(max_ulp(math::Erf{}, static_cast<double (*)(double)>(std::erf), x), 8);
  EXPECT_LE(max_ulp(math::Tanh{}, static_cast<double (*)(double)>(std::tanh), x), 4);
  EXPECT_LE(max_ulp(math::Sigmoid{}, sigmoid, x), 4);
  EXPECT_LE(max_ulp(math::Silu{}, silu, x), 4);
  EXPECT_LE(max_ulp(math::Exp{}, static_cast<double (*)(double)>(std::exp), x), 1);
}

struct FastExp {
  float operator()(float x) const { return math::fast_expf(x); }
};

TEST(SimdLoops, FastExpIsAccurateInItsRangeAndOverflowsToInfinity) {
  EXPECT_LE(
      max_ulp(FastExp{}, static_cast<double (*)(double)>(std::exp), grid(-87.f, 88.3f, 100003)), 2);
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> x = {88.4f, 100.f, inf, -87.1f, -1e4f, -inf, nan};
  std::vector<float> y(x.size());
  simd::map(FastExp{}, x.data(), y.data(), static_cast<int64_t>(x.size()));
  EXPECT_EQ(y[0], inf);  // from 127.5 * ln 2 on, as documented
  EXPECT_EQ(y[1], inf);
  EXPECT_EQ(y[2], inf);
  EXPECT_EQ(y[3], 0.f);  // below exp(-87): flushed
  EXPECT_EQ(y[4], 0.f);
  EXPECT_EQ(y[5], 0.f);
  EXPECT_TRUE(std::isnan(y[6]));
}

TEST(SimdLoops, SpecialValuesPassThrough) {
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> x = {nan, inf, -inf, 0.f, -0.f, 100.f, -100.f};
  std::vector<float> y(x.size());
  simd::map(math::Sigmoid{}, x.data(), y.data(), static_cast<int64_t>(x.size()));
  EXPECT_TRUE(std::isnan(y[0]));
  EXPECT_EQ(y[1], 1.f);
  EXPECT_EQ(y[2], 0.f);
  EXPECT_EQ(y[3], 0.5f);
  EXPECT_EQ(y[5], 1.f);
  EXPECT_EQ(y[6], 0.f);  // exp(-100) is below float's normal range: flushed, as documented
  simd::map(math::Silu{}, x.data(), y.data(), static_cast<int64_t>(x.size()));
  EXPECT_TRUE(std::isnan(y[0]));
  EXPECT_EQ(y[1], inf);
  EXPECT_TRUE(std::isnan(y[2]));  // -inf * sigmoid(-inf) = -inf * 0, as torch gives
  EXPECT_EQ(y[3], 0.f);
  EXPECT_EQ(y[5], 100.f);
  EXPECT_EQ(y[6], 0.f);  // -100 * exp(-100) is below float's normal range: flushed
  EXPECT_TRUE(std::signbit(y[6]));
  simd::map(math::Tanh{}, x.data(), y.data(), static_cast<int64_t>(x.size()));
  EXPECT_TRUE(std::isnan(y[0]));
  EXPECT_EQ(y[1], 1.f);
  EXPECT_EQ(y[2], -1.f);
  EXPECT_EQ(y[3], 0.f);
  simd::map(math::Erf{}, x.data(), y.data(), static_cast<int64_t>(x.size()));
  EXPECT_TRUE(std::isnan(y[0]));
  EXPECT_EQ(y[1], 1.f);
  EXPECT_EQ(y[2], -1.f);
  EXPECT_EQ(y[3], 0.f);
}

TEST(SimdLoops, InPlaceAndEveryLengthUpToThreeVectors) {
  for (int64_t n = 0; n <= 48; ++n) {
    SCOPED_TRACE(n);
    std::vector<float> x = grid(-3.f, 3.f, std::max<int64_t>(n, 2));
    x.resize(static_cast<size_t>(n));
    std::vector<float> y = x;
    simd::map(math::Relu{}, y.data(), y.data(), n);
    for (int64_t i = 0; i < n; ++i) EXPECT_EQ(y[i], std::max(x[i], 0.f));
  }
}

TEST(SimdLoops, BinaryLoopsMatchTheScalarResultExactly) {
  // Add, Mul and Sub are single IEEE operations: every clone must give the exact result.
  const std::vector<float> a = grid(-5.f, 7.f, 1001), b = grid(3.f, -2.f, 1001);
  const auto n = static_cast<int64_t>(a.size());
  std::vector<float> y(a.size());
  simd::map2(math::Mul{}, a.data(), b.data(), y.data(), n);
  for (size_t i = 0; i < a.size(); ++i) EXPECT_EQ(y[i], a[i] * b[i]) << i;
  simd::map2_scalar_b(math::Sub{}, a.data(), 1.5f, y.data(), n);
  for (size_t i = 0; i < a.size(); ++i) EXPECT_EQ(y[i], a[i] - 1.5f) << i;
  simd::map2_scalar_a(math::Add{}, 0.25f, b.data(), y.data(), n);
  for (size_t i = 0; i < a.size(); ++i) EXPECT_EQ(y[i], 0.25f + b[i]) << i;
}

}  // namespace
}  // namespace dprun
