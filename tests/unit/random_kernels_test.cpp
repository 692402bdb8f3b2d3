// Random generators with a seed attribute (ops/random/random.cpp): RandomUniform, RandomNormalLike
// and Bernoulli give the requested shape and dtype, stay in range, repeat with the same seed and
// match their distribution's mean and spread (sample statistics within tolerances).
// tests/unit/random_seed_test.cpp covers the ops without a seed attribute.
#include <gtest/gtest.h>

#include <cmath>

#include "engine/error.h"
#include "op_test_util.h"

namespace dprun {
namespace {

using testing::expect_values;
using testing::make_node;
using testing::run_node;

TEST(RandomKernels, UniformNormalShapesRangesAndSeed) {
  Node u = make_node("RandomUniform", {}, {"y"});
  u.attributes["shape"] = Attribute::of_ints({100, 50});
  u.attributes["low"] = Attribute::of_float(-2.f);
  u.attributes["high"] = Attribute::of_float(3.f);
  u.attributes["seed"] = Attribute::of_float(7.f);
  auto y = run_node(u, {}, 1)[0];
  ASSERT_EQ(y.dtype(), DType::Float32);
  ASSERT_EQ(shape_to_string(y.shape()), shape_to_string(Shape{100, 50}));
  double sum = 0;
  for (int64_t i = 0; i < y.numel(); ++i) {
    EXPECT_GE(y.item_as_double(i), -2);
    EXPECT_LT(y.item_as_double(i), 3);
    sum += y.item_as_double(i);
  }
  EXPECT_NEAR(sum / y.numel(), 0.5, 0.1);
  // The same seed draws the same values.
  auto again = run_node(u, {}, 1)[0];
  for (int64_t i = 0; i < y.numel(); ++i) ASSERT_EQ(y.item_as_double(i), again.item_as_double(i));

  Node nl = make_node("RandomNormalLike", {"x"}, {"y"});
  nl.attributes["mean"] = Attribute::of_float(1.f);
  nl.attributes["scale"] = Attribute::of_float(2.f);
  auto z = run_node(nl, {Tensor::zeros({4000}, DType::Float64)}, 1)[0];
  ASSERT_EQ(z.dtype(), DType::Float64);
  double m = 0, v = 0;
  for (int64_t i = 0; i < z.numel(); ++i) m += z.item_as_double(i);
  m /= z.numel();
  for (int64_t i = 0; i < z.numel(); ++i) v += std::pow(z.item_as_double(i) - m, 2);
  v /= z.numel();
  EXPECT_NEAR(m, 1.0, 0.15);
  EXPECT_NEAR(std::sqrt(v), 2.0, 0.15);

  Node bad = make_node("RandomUniform", {}, {"y"});
  bad.attributes["shape"] = Attribute::of_ints({2});
  bad.attributes["dtype"] = Attribute::of_int(7);  // int64 is not allowed
  EXPECT_THROW(run_node(bad, {}, 1), Error);
}

TEST(RandomKernels, Bernoulli) {
  std::vector<float> p(2000);
  for (size_t i = 0; i < p.size(); ++i) p[i] = i < 500 ? 0.f : i < 1000 ? 1.f : 0.3f;
  Node n = make_node("Bernoulli", {"p"}, {"y"});
  n.attributes["dtype"] = Attribute::of_int(9);  // bool
  n.attributes["seed"] = Attribute::of_float(1.f);
  auto y = run_node(n, {Tensor::from_vector<float>({2000}, p)}, 15)[0];
  ASSERT_EQ(y.dtype(), DType::Bool);
  double ones = 0;
  for (int64_t i = 0; i < 2000; ++i) {
    const double v = y.item_as_double(i);
    if (i < 500) {
      ASSERT_EQ(v, 0);
    } else if (i < 1000) {
      ASSERT_EQ(v, 1);
    } else {
      ones += v;
    }
  }
  EXPECT_NEAR(ones / 1000, 0.3, 0.06);
  EXPECT_THROW(run_node(n, {Tensor::from_vector<float>({1}, {1.5f})}, 15), Error);
}

}  // namespace
}  // namespace dprun
