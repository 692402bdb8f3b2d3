// Elementwise kernels: unary math and activations, broadcasting binary ops, comparisons,
// variadic ops, Where, Clip, Cast. Values are hand-computed or come from a naive reference.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <random>

#include "op_test_util.h"

namespace dprun {
namespace {

using testing::make_node;
using testing::run_node;

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

template <class T>
std::vector<T> values(const Tensor& t) {
  const T* p = t.data<T>();
  return std::vector<T>(p, p + t.numel());
}

/// Runs a one-output node.
Tensor run1(const Node& node, const std::vector<Tensor>& inputs, int64_t opset = 17) {
  return run_node(node, inputs, opset).at(0);
}

Node unary(const std::string& op) {
  return make_node(op, {"x"}, {"y"});
}
Node binary(const std::string& op) {
  return make_node(op, {"a", "b"}, {"y"});
}

Tensor random_floats(Shape shape, uint32_t seed, float lo = -3.0f, float hi = 3.0f) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(static_cast<size_t>(shape_numel(shape)));
  for (auto& x : v) x = dist(gen);
  return Tensor::from_vector<float>(shape, v);
}

/// Naive numpy broadcasting reference: out[i] = f(a[ia], b[ib]).
template <class TA, class TB, class TO>
std::vector<TO> reference_binary(const Tensor& a, const Tensor& b,
                                 const std::function<TO(TA, TB)>& f) {
  Shape out = broadcast_shapes(a.shape(), b.shape());
  const int64_t n = shape_numel(out);
  auto offset = [&](const Shape& s, int64_t flat) {
    int64_t off = 0, stride = 1;
    for (size_t i = 0; i < out.size(); ++i) {
      size_t d = out.size() - 1 - i;
      int64_t idx = flat % out[d];
      flat /= out[d];
      if (i < s.size()) {
        int64_t size = s[s.size() - 1 - i];
        if (size != 1) off += idx * stride;
        stride *= size;
      }
    }
    return off;
  };
  std::vector<TO> r(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i)
    r[static_cast<size_t>(i)] =
        f(a.data<TA>()[offset(a.shape(), i)], b.data<TB>()[offset(b.shape(), i)]);
  return r;
}

// ---- unary math ------------------------------------------------------------------------

TEST(ElementwiseUnary, MathMatchesStd) {
  Tensor x = Tensor::from_vector<float>({2, 3}, {0.1f, 0.25f, 0.5f, 0.75f, 0.9f, 0.3f});
  const std::vector<std::pair<std::string, std::function<float(float)>>> cases = {
      {"Sqrt", [](float v) { return std::sqrt(v); }},
      {"Exp", [](float v) { return std::exp(v); }},
      {"Log", [](float v) { return std::log(v); }},
      {"Erf", [](float v) { return std::erf(v); }},
      {"Reciprocal", [](float v) { return 1.0f / v; }},
      {"Sin", [](float v) { return std::sin(v); }},
      {"Cos", [](float v) { return std::cos(v); }},
      {"Tan", [](float v) { return std::tan(v); }},
      {"Asin", [](float v) { return std::asin(v); }},
      {"Acos", [](float v) { return std::acos(v); }},
      {"Atan", [](float v) { return std::atan(v); }},
      {"Sinh", [](float v) { return std::sinh(v); }},
      {"Cosh", [](float v) { return std::cosh(v); }},
      {"Asinh", [](float v) { return std::asinh(v); }},
      {"Atanh", [](float v) { return std::atanh(v); }},
      {"Acosh", [](float v) { return std::acosh(v + 1.0f); }},
  };
  for (const auto& [op, f] : cases) {
    Tensor in = x;
    if (op == "Acosh") {  // domain [1, inf)
      std::vector<float> shifted = values<float>(x);
      for (auto& v : shifted) v += 1.0f;
      in = Tensor::from_vector<float>({2, 3}, shifted);
    }
    Tensor y = run1(unary(op), {in});
    ASSERT_EQ(y.shape(), (Shape{2, 3})) << op;
    for (int64_t i = 0; i < 6; ++i)
      EXPECT_NEAR(y.data<float>()[i], f(x.data<float>()[i]), 1e-6f) << op << " element " << i;
  }
}

// Exp over its whole range, with overflow, underflow and denormal results; Erf's vectorisable
// float32 approximation within a few ulp of the exact value.
TEST(ElementwiseUnary, ExpAccurateOverItsWholeRange) {
  std::vector<float> xs;
  for (float v = -110.0f; v <= 95.0f; v += 0.0371f) xs.push_back(v);
  for (float v : {0.0f, -0.0f, 1e-7f, 88.0f, 88.5f, 88.72f, 88.73f, -87.0f, -87.5f, -100.0f,
                  -103.9f, -104.0f, -200.0f, kInf, -kInf})
    xs.push_back(v);
  Tensor y =
      run1(unary("Exp"), {Tensor::from_vector<float>({static_cast<int64_t>(xs.size())}, xs)});
  for (size_t i = 0; i < xs.size(); ++i) {
    double want = std::exp(static_cast<double>(xs[i]));
    float got = y.data<float>()[i];
    if (want > std::numeric_limits<float>::max()) {
      EXPECT_EQ(got, kInf) << "exp(" << xs[i] << ")";
    } else if (want >= std::numeric_limits<float>::min()) {  // normal results: 4e-7
      EXPECT_NEAR(got, want, 4e-7 * want) << "exp(" << xs[i] << ")";
    } else {  // denormal results: 1e-5 relative, or half the smallest denormal
      EXPECT_NEAR(got, want, 1e-5 * want + 0.7e-45) << "exp(" << xs[i] << ")";
    }
  }
  Tensor nan = run1(unary("Exp"), {Tensor::from_vector<float>({1}, {kNaN})});
  EXPECT_TRUE(std::isnan(nan.data<float>()[0]));
}

TEST(ElementwiseUnary, ErfAccurateOverItsWholeRange) {
  std::vector<float> xs;
  for (float v = -6.0f; v <= 6.0f; v += 0.00137f) xs.push_back(v);
  for (float v :
       {0.0f, -0.0f, 1e-30f, -1e-20f, 1e-7f, 0.999999f, 1.0f, -1.0f, 10.0f, -10.0f, kInf, -kInf})
    xs.push_back(v);
  Tensor y =
      run1(unary("Erf"), {Tensor::from_vector<float>({static_cast<int64_t>(xs.size())}, xs)});
  for (size_t i = 0; i < xs.size(); ++i) {
    double want = std::erf(static_cast<double>(xs[i]));
    // 3 ulp below |x| = 1 (relative accuracy down to the smallest x), 4.6e-7 from there.
    EXPECT_NEAR(y.data<float>()[i], want, std::fabs(xs[i]) < 1 ? 3.6e-7 * std::fabs(want) : 4.6e-7)
        << "erf(" << xs[i] << ")";
  }
  EXPECT_EQ(y.data<float>()[xs.size() - 2], 1.0f);
  EXPECT_EQ(y.data<float>()[xs.size() - 1], -1.0f);
  Tensor nan = run1(unary("Erf"), {Tensor::from_vector<float>({1}, {kNaN})});
  EXPECT_TRUE(std::isnan(nan.data<float>()[0]));
}

TEST(ElementwiseUnary, DoubleAndEmptyTensors) {
  Tensor y = run1(unary("Exp"), {Tensor::from_vector<double>({2}, {0.0, 1.0})});
  EXPECT_EQ(y.dtype(), DType::Float64);
  EXPECT_DOUBLE_EQ(y.data<double>()[1], std::exp(1.0));
  Tensor e = run1(unary("Sqrt"), {Tensor::zeros({0, 3}, DType::Float32)});
  EXPECT_EQ(e.shape(), (Shape{0, 3}));
}

TEST(ElementwiseUnary, RoundHalfToEvenFloorCeil) {
  Tensor x = Tensor::from_vector<float>({7}, {0.5f, 1.5f, 2.5f, -0.5f, -2.5f, 2.4f, -2.6f});
  EXPECT_EQ(values<float>(run1(unary("Round"), {x})),
            (std::vector<float>{0, 2, 2, -0.0f, -2, 2, -3}));
  EXPECT_EQ(values<float>(run1(unary("Floor"), {x})), (std::vector<float>{0, 1, 2, -1, -3, 2, -3}));
  EXPECT_EQ(values<float>(run1(unary("Ceil"), {x})),
            (std::vector<float>{1, 2, 3, -0.0f, -2, 3, -2}));
}

TEST(ElementwiseUnary, IntegerAbsNegSignRelu) {
  Tensor x = Tensor::from_vector<int32_t>({4}, {-5, 0, 7, std::numeric_limits<int32_t>::min()});
  EXPECT_EQ(values<int32_t>(run1(unary("Abs"), {x})),
            (std::vector<int32_t>{5, 0, 7, std::numeric_limits<int32_t>::min()}));
  EXPECT_EQ(values<int32_t>(run1(unary("Neg"), {x})),
            (std::vector<int32_t>{5, 0, -7, std::numeric_limits<int32_t>::min()}));
  EXPECT_EQ(values<int32_t>(run1(unary("Sign"), {x})), (std::vector<int32_t>{-1, 0, 1, -1}));
  EXPECT_EQ(values<int32_t>(run1(unary("Relu"), {x})), (std::vector<int32_t>{0, 0, 7, 0}));
  Tensor u = Tensor::from_vector<uint8_t>({2}, {3, 200});
  EXPECT_EQ(values<uint8_t>(run1(unary("Abs"), {u})), (std::vector<uint8_t>{3, 200}));
}

TEST(ElementwiseUnary, SignKeepsNaNAndZero) {
  Tensor y = run1(unary("Sign"), {Tensor::from_vector<float>({4}, {-2.0f, 0.0f, 3.0f, kNaN})});
  EXPECT_EQ(y.data<float>()[0], -1.0f);
  EXPECT_EQ(y.data<float>()[1], 0.0f);
  EXPECT_EQ(y.data<float>()[2], 1.0f);
  EXPECT_TRUE(std::isnan(y.data<float>()[3]));
}

TEST(ElementwiseUnary, IsNaNIsInfWithAttributes) {
  Tensor x = Tensor::from_vector<float>({4}, {1.0f, kInf, -kInf, kNaN});
  Tensor nan = run1(unary("IsNaN"), {x});
  EXPECT_EQ(nan.dtype(), DType::Bool);
  EXPECT_EQ(values<bool>(nan), (std::vector<bool>{false, false, false, true}));
  EXPECT_EQ(values<bool>(run1(unary("IsInf"), {x})), (std::vector<bool>{false, true, true, false}));
  Node pos = unary("IsInf");
  pos.attributes["detect_negative"] = Attribute::of_int(0);
  EXPECT_EQ(values<bool>(run1(pos, {x})), (std::vector<bool>{false, true, false, false}));
  Node neg = unary("IsInf");
  neg.attributes["detect_positive"] = Attribute::of_int(0);
  EXPECT_EQ(values<bool>(run1(neg, {x})), (std::vector<bool>{false, false, true, false}));
}

TEST(ElementwiseUnary, NotAndBitwiseNot) {
  EXPECT_EQ(values<bool>(run1(unary("Not"), {Tensor::from_vector<bool>({2}, {true, false})})),
            (std::vector<bool>{false, true}));
  EXPECT_EQ(values<uint8_t>(
                run1(unary("BitwiseNot"), {Tensor::from_vector<uint8_t>({2}, {0, 0x0f})}, 18)),
            (std::vector<uint8_t>{0xff, 0xf0}));
  EXPECT_EQ(
      values<int32_t>(run1(unary("BitwiseNot"), {Tensor::from_vector<int32_t>({1}, {5})}, 18)),
      (std::vector<int32_t>{-6}));
}

TEST(ElementwiseUnary, Float16ComputesThroughFloat) {
  Tensor x = Tensor::from_vector<Float16>({3}, {Float16(0.25f), Float16(4.0f), Float16(-1.0f)});
  Tensor y = run1(unary("Sqrt"), {x});
  EXPECT_EQ(y.dtype(), DType::Float16);
  EXPECT_EQ(static_cast<float>(y.data<Float16>()[0]), 0.5f);
  EXPECT_EQ(static_cast<float>(y.data<Float16>()[1]), 2.0f);
  EXPECT_TRUE(std::isnan(static_cast<float>(y.data<Float16>()[2])));
  Tensor b = Tensor::from_vector<BFloat16>({2}, {BFloat16(-2.0f), BFloat16(3.0f)});
  Tensor r = run1(unary("Relu"), {b});
  EXPECT_EQ(static_cast<float>(r.data<BFloat16>()[0]), 0.0f);
  EXPECT_EQ(static_cast<float>(r.data<BFloat16>()[1]), 3.0f);
}

TEST(ElementwiseUnary, RejectsUnsupportedDtype) {
  EXPECT_THROW(run1(unary("Sqrt"), {Tensor::from_vector<int32_t>({1}, {4})}), Error);
  EXPECT_THROW(run1(unary("Not"), {Tensor::from_vector<float>({1}, {1.0f})}), Error);
  EXPECT_THROW(run1(unary("BitwiseNot"), {Tensor::from_vector<float>({1}, {1.0f})}, 18), Error);
}

// ---- activations -----------------------------------------------------------------------

TEST(ElementwiseActivation, SigmoidTanhAccurateOverWideRange) {
  std::vector<float> xs;
  for (float v = -100.0f; v <= 100.0f; v += 0.173f) xs.push_back(v);
  for (float v : {0.0f, -0.0f, 1e-6f, -1e-6f, 0.003f, -0.005f, 88.0f, -88.0f, 200.0f, -200.0f})
    xs.push_back(v);
  Tensor x = Tensor::from_vector<float>({static_cast<int64_t>(xs.size())}, xs);
  Tensor s = run1(unary("Sigmoid"), {x});
  Tensor t = run1(unary("Tanh"), {x});
  for (size_t i = 0; i < xs.size(); ++i) {
    double v = xs[i];
    double sig = 1.0 / (1.0 + std::exp(-v));
    EXPECT_NEAR(s.data<float>()[i], sig, 1e-6 * sig + 1e-37) << "sigmoid(" << v << ")";
    EXPECT_NEAR(t.data<float>()[i], std::tanh(v), 2e-7 + 2e-6 * std::fabs(std::tanh(v)))
        << "tanh(" << v << ")";
  }
}

TEST(ElementwiseActivation, GeluAccurateOverWideRange) {
  std::vector<float> xs;
  for (float v = -12.0f; v <= 12.0f; v += 0.0137f) xs.push_back(v);
  for (float v : {0.0f, 1e-7f, -1e-7f, 50.0f, -50.0f}) xs.push_back(v);
  Tensor x = Tensor::from_vector<float>({static_cast<int64_t>(xs.size())}, xs);
  Tensor exact = run1(unary("Gelu"), {x}, 20);
  Node tanh_node = unary("Gelu");
  tanh_node.attributes["approximate"] = Attribute::of_string("tanh");
  Tensor approx = run1(tanh_node, {x}, 20);
  for (size_t i = 0; i < xs.size(); ++i) {
    double v = xs[i];
    double want = 0.5 * v * (1.0 + std::erf(v / std::sqrt(2.0)));
    double want_tanh =
        0.5 * v * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (v + 0.044715 * v * v * v)));
    EXPECT_NEAR(exact.data<float>()[i], want, 1e-6 * std::fabs(want) + 1e-7) << "gelu(" << v << ")";
    EXPECT_NEAR(approx.data<float>()[i], want_tanh, 1e-6 * std::fabs(want_tanh) + 1e-7)
        << "gelu_tanh(" << v << ")";
  }
  Tensor nan = run1(unary("Gelu"), {Tensor::from_vector<float>({1}, {kNaN})}, 20);
  EXPECT_TRUE(std::isnan(nan.data<float>()[0]));
}

TEST(ElementwiseActivation, ParametrisedActivations) {
  Tensor x = Tensor::from_vector<float>({5}, {-3.0f, -1.0f, 0.0f, 1.5f, 4.0f});
  auto check = [&](Node node, std::function<float(float)> f, int64_t opset = 17) {
    Tensor y = run1(node, {x}, opset);
    for (int64_t i = 0; i < 5; ++i)
      EXPECT_NEAR(y.data<float>()[i], f(x.data<float>()[i]), 1e-6f)
          << node.op_type << " at " << x.data<float>()[i];
  };
  check(unary("Relu"), [](float v) { return v > 0 ? v : 0.0f; });
  check(unary("LeakyRelu"), [](float v) { return v >= 0 ? v : 0.01f * v; });
  Node leaky = unary("LeakyRelu");
  leaky.attributes["alpha"] = Attribute::of_float(0.2f);
  check(leaky, [](float v) { return v >= 0 ? v : 0.2f * v; });
  check(unary("Elu"), [](float v) { return v >= 0 ? v : std::exp(v) - 1.0f; });
  Node elu = unary("Elu");
  elu.attributes["alpha"] = Attribute::of_float(2.0f);
  check(elu, [](float v) { return v >= 0 ? v : 2.0f * (std::exp(v) - 1.0f); });
  check(unary("Selu"), [](float v) {
    return 1.0507009873554805f * (v > 0 ? v : 1.6732632423543772f * (std::exp(v) - 1.0f));
  });
  Node selu = unary("Selu");
  selu.attributes["alpha"] = Attribute::of_float(2.0f);
  selu.attributes["gamma"] = Attribute::of_float(3.0f);
  check(selu, [](float v) { return 3.0f * (v > 0 ? v : 2.0f * (std::exp(v) - 1.0f)); });
  Node celu = unary("Celu");
  celu.attributes["alpha"] = Attribute::of_float(2.0f);
  check(celu, [](float v) {
    return std::max(0.0f, v) + std::min(0.0f, 2.0f * (std::exp(v / 2.0f) - 1.0f));
  });
  check(unary("HardSigmoid"), [](float v) { return std::clamp(0.2f * v + 0.5f, 0.0f, 1.0f); });
  Node hs = unary("HardSigmoid");
  hs.attributes["alpha"] = Attribute::of_float(0.5f);
  hs.attributes["beta"] = Attribute::of_float(0.6f);
  check(hs, [](float v) { return std::clamp(0.5f * v + 0.6f, 0.0f, 1.0f); });
  check(unary("HardSwish"), [](float v) { return v * std::clamp(v / 6.0f + 0.5f, 0.0f, 1.0f); });
  check(unary("Softplus"), [](float v) { return std::log(1.0f + std::exp(v)); });
  check(unary("Softsign"), [](float v) { return v / (1.0f + std::fabs(v)); });
  check(unary("ThresholdedRelu"), [](float v) { return v > 1.0f ? v : 0.0f; });
  Node tr = unary("ThresholdedRelu");
  tr.attributes["alpha"] = Attribute::of_float(2.0f);
  check(tr, [](float v) { return v > 2.0f ? v : 0.0f; });
  check(
      unary("Mish"), [](float v) { return v * std::tanh(std::log1p(std::exp(v))); }, 18);
  check(
      unary("Gelu"), [](float v) { return 0.5f * v * (1.0f + std::erf(v / std::sqrt(2.0f))); }, 20);
  Node gelu_tanh = unary("Gelu");
  gelu_tanh.attributes["approximate"] = Attribute::of_string("tanh");
  check(
      gelu_tanh,
      [](float v) {
        return 0.5f * v * (1.0f + std::tanh(0.7978845608f * (v + 0.044715f * v * v * v)));
      },
      20);
  check(unary("Shrink"), [](float v) { return v < -0.5f ? v : (v > 0.5f ? v : 0.0f); });
  Node soft = unary("Shrink");
  soft.attributes["lambd"] = Attribute::of_float(1.5f);
  soft.attributes["bias"] = Attribute::of_float(1.5f);
  check(soft, [](float v) { return v < -1.5f ? v + 1.5f : (v > 1.5f ? v - 1.5f : 0.0f); });
}

TEST(ElementwiseActivation, SoftplusLargeInputsDoNotOverflow) {
  Tensor y = run1(unary("Softplus"), {Tensor::from_vector<float>({2}, {100.0f, -100.0f})});
  EXPECT_FLOAT_EQ(y.data<float>()[0], 100.0f);
  EXPECT_NEAR(y.data<float>()[1], std::exp(-100.0f), 1e-45f);
}

TEST(ElementwiseActivation, ShrinkOnIntegers) {
  Node n = unary("Shrink");
  n.attributes["lambd"] = Attribute::of_float(1.5f);
  n.attributes["bias"] = Attribute::of_float(1.0f);
  EXPECT_EQ(values<int32_t>(run1(n, {Tensor::from_vector<int32_t>({5}, {-3, -1, 0, 1, 3})})),
            (std::vector<int32_t>{-2, 0, 0, 0, 2}));
}

TEST(ElementwiseActivation, AttributeErrors) {
  Node gelu = unary("Gelu");
  gelu.attributes["approximate"] = Attribute::of_string("fast");
  EXPECT_THROW(run1(gelu, {Tensor::from_vector<float>({1}, {1.0f})}, 20), Error);
  Node celu = unary("Celu");
  celu.attributes["alpha"] = Attribute::of_float(0.0f);
  EXPECT_THROW(run1(celu, {Tensor::from_vector<float>({1}, {1.0f})}), Error);
  // Gelu does not exist before opset 20.
  EXPECT_THROW(run1(unary("Gelu"), {Tensor::from_vector<float>({1}, {1.0f})}, 19), Error);
}

TEST(ElementwiseActivation, PReluBroadcastsSlope) {
  Tensor x = Tensor::from_vector<float>({2, 3}, {-1, 2, -3, 4, -5, 6});
  Tensor slope = Tensor::from_vector<float>({3}, {0.1f, 0.2f, 0.3f});
  Tensor y = run1(make_node("PRelu", {"x", "s"}, {"y"}), {x, slope});
  std::vector<float> want = {-0.1f, 2, -0.9f, 4, -1.0f, 6};
  for (size_t i = 0; i < want.size(); ++i) EXPECT_FLOAT_EQ(y.data<float>()[i], want[i]);
  // A slope that does not broadcast to X is rejected.
  EXPECT_THROW(
      run1(make_node("PRelu", {"x", "s"}, {"y"}), {x, Tensor::from_vector<float>({2}, {1, 1})}),
      Error);
  // Nor may the slope make the output larger than X (unidirectional broadcast).
  EXPECT_THROW(
      run1(make_node("PRelu", {"x", "s"}, {"y"}),
           {Tensor::from_vector<float>({3}, {1, 2, 3}), Tensor::zeros({2, 3}, DType::Float32)}),
      Error);
}

TEST(ElementwiseActivation, PReluBeforeOpset7IsPerChannel) {
  Tensor x = Tensor::from_vector<float>({1, 2, 2, 2}, {-1, -1, -1, -1, -2, -2, 2, 2});
  Tensor slope = Tensor::from_vector<float>({2}, {0.5f, 0.25f});
  Tensor y = run1(make_node("PRelu", {"x", "s"}, {"y"}), {x, slope}, 6);
  EXPECT_EQ(values<float>(y), (std::vector<float>{-0.5f, -0.5f, -0.5f, -0.5f, -0.5f, -0.5f, 2, 2}));
}

// ---- binary arithmetic -----------------------------------------------------------------

TEST(ElementwiseBinary, BroadcastingMatchesReference) {
  const std::vector<std::pair<Shape, Shape>> shapes = {
      {{3, 4, 5}, {3, 4, 5}},
      {{3, 4, 5}, {5}},
      {{3, 4, 5}, {}},
      {{}, {3, 4}},
      {{2, 3, 4, 5}, {3, 1, 1}},
      {{2, 1, 4}, {3, 1}},
      {{1, 4, 1, 6}, {3, 1, 5, 6}},
      {{4, 1}, {1, 5}},
      {{5}, {2, 3, 5}},
      {{2, 0, 3}, {3}},
      {{1, 1}, {1}},
  };
  const std::vector<std::pair<std::string, std::function<float(float, float)>>> ops = {
      {"Add", std::plus<float>()},
      {"Sub", std::minus<float>()},
      {"Mul", std::multiplies<float>()},
      {"Div", std::divides<float>()},
  };
  uint32_t seed = 1;
  for (const auto& [sa, sb] : shapes) {
    Tensor a = random_floats(sa, seed++);
    Tensor b = random_floats(sb, seed++, 0.5f, 2.0f);
    for (const auto& [op, f] : ops) {
      Tensor y = run1(binary(op), {a, b});
      ASSERT_EQ(y.shape(), broadcast_shapes(sa, sb)) << op;
      EXPECT_EQ(values<float>(y), (reference_binary<float, float, float>(a, b, f)))
          << op << " " << shape_to_string(sa) << " " << shape_to_string(sb);
    }
  }
}

TEST(ElementwiseBinary, LargeTensorsSplitAcrossChunks) {
  // Big enough for several parallel chunks, with rows that straddle chunk boundaries.
  for (const auto& [sa, sb] : std::vector<std::pair<Shape, Shape>>{{{301, 997}, {997}},
                                                                   {{7, 33, 1001}, {33, 1}},
                                                                   {{300001}, {300001}},
                                                                   {{3, 1, 50000}, {1, 4, 1}}}) {
    Tensor a = random_floats(sa, 11);
    Tensor b = random_floats(sb, 12);
    Tensor y = run1(binary("Mul"), {a, b});
    EXPECT_EQ(values<float>(y),
              (reference_binary<float, float, float>(a, b, std::multiplies<float>())))
        << shape_to_string(sa) << " * " << shape_to_string(sb);
  }
}

TEST(ElementwiseBinary, IntegerArithmeticWrapsAndTruncates) {
  Tensor a = Tensor::from_vector<int32_t>({5}, {7, -7, 7, -7, std::numeric_limits<int32_t>::min()});
  Tensor b = Tensor::from_vector<int32_t>({5}, {2, 2, -2, -2, -1});
  EXPECT_EQ(values<int32_t>(run1(binary("Div"), {a, b})),
            (std::vector<int32_t>{3, -3, -3, 3, std::numeric_limits<int32_t>::min()}));
  Tensor big = Tensor::from_vector<int32_t>({1}, {std::numeric_limits<int32_t>::max()});
  EXPECT_EQ(values<int32_t>(run1(binary("Add"), {big, Tensor::from_vector<int32_t>({1}, {1})})),
            (std::vector<int32_t>{std::numeric_limits<int32_t>::min()}));
  Tensor u = Tensor::from_vector<uint8_t>({3}, {250, 3, 16});
  Tensor v = Tensor::from_vector<uint8_t>({3}, {10, 5, 16});
  EXPECT_EQ(values<uint8_t>(run1(binary("Add"), {u, v})), (std::vector<uint8_t>{4, 8, 32}));
  EXPECT_EQ(values<uint8_t>(run1(binary("Sub"), {u, v})), (std::vector<uint8_t>{240, 254, 0}));
  EXPECT_EQ(values<uint8_t>(run1(binary("Mul"), {u, v})), (std::vector<uint8_t>{196, 15, 0}));
  EXPECT_EQ(values<uint8_t>(run1(binary("Div"), {u, v})), (std::vector<uint8_t>{25, 0, 1}));
}

TEST(ElementwiseBinary, IntegerDivisionByZeroFails) {
  Tensor a = Tensor::from_vector<int64_t>({2}, {1, 2});
  Tensor z = Tensor::from_vector<int64_t>({2}, {1, 0});
  EXPECT_THROW(run1(binary("Div"), {a, z}), Error);
  EXPECT_THROW(run1(binary("Mod"), {a, z}), Error);
  // Floats divide by zero into infinities.
  Tensor f = run1(binary("Div"), {Tensor::from_vector<float>({1}, {1.0f}),
                                  Tensor::from_vector<float>({1}, {0.0f})});
  EXPECT_EQ(f.data<float>()[0], kInf);
}

TEST(ElementwiseBinary, ModSignRules) {
  Tensor a = Tensor::from_vector<int32_t>({6}, {-4, 7, 5, 4, -7, 8});
  Tensor b = Tensor::from_vector<int32_t>({6}, {2, -3, 8, -2, 3, 5});
  EXPECT_EQ(values<int32_t>(run1(binary("Mod"), {a, b})),
            (std::vector<int32_t>{0, -2, 5, 0, 2, 3}));
  Node fmod = binary("Mod");
  fmod.attributes["fmod"] = Attribute::of_int(1);
  EXPECT_EQ(values<int32_t>(run1(fmod, {a, b})), (std::vector<int32_t>{0, 1, 5, 0, -1, 3}));
  Tensor fa = Tensor::from_vector<float>({4}, {-4.3f, 7.2f, 5.0f, -7.5f});
  Tensor fb = Tensor::from_vector<float>({4}, {2.1f, -3.4f, 8.0f, 3.0f});
  Tensor fr = run1(fmod, {fa, fb});
  for (int i = 0; i < 4; ++i)
    EXPECT_FLOAT_EQ(fr.data<float>()[i], std::fmod(fa.data<float>()[i], fb.data<float>()[i]));
  // fmod=0 on floats follows the divisor's sign, like numpy.mod.
  Tensor fm = run1(binary("Mod"), {fa, fb});
  EXPECT_NEAR(fm.data<float>()[0], 2.0f, 1e-5f);
  EXPECT_NEAR(fm.data<float>()[1], -3.0f, 1e-5f);
  EXPECT_NEAR(fm.data<float>()[3], 1.5f, 1e-5f);
  Node bad = binary("Mod");
  bad.attributes["fmod"] = Attribute::of_int(2);
  EXPECT_THROW(run1(bad, {a, b}), Error);
}

TEST(ElementwiseBinary, PowMixedTypes) {
  Tensor fx = Tensor::from_vector<float>({3}, {2.0f, 9.0f, -2.0f});
  Tensor fy = Tensor::from_vector<float>({3}, {3.0f, 0.5f, 2.0f});
  EXPECT_EQ(values<float>(run1(binary("Pow"), {fx, fy})), (std::vector<float>{8, 3, 4}));
  Tensor iy = Tensor::from_vector<int64_t>({3}, {3, 2, 3});
  Tensor r = run1(binary("Pow"), {fx, iy}, 15);
  EXPECT_EQ(r.dtype(), DType::Float32);
  EXPECT_EQ(values<float>(r), (std::vector<float>{8, 81, -8}));
  Tensor ix = Tensor::from_vector<int32_t>({4}, {2, 3, -2, 5});
  Tensor ie = Tensor::from_vector<int32_t>({4}, {10, 3, 3, -1});
  EXPECT_EQ(values<int32_t>(run1(binary("Pow"), {ix, ie}, 15)),
            (std::vector<int32_t>{1024, 27, -8, 0}));
  Tensor fe = Tensor::from_vector<float>({4}, {0.5f, 2.0f, 2.0f, 1.0f});
  EXPECT_EQ(values<int32_t>(run1(binary("Pow"), {ix, fe}, 15)), (std::vector<int32_t>{1, 9, 4, 5}));
  // Broadcast scalar exponent.
  EXPECT_EQ(values<float>(run1(binary("Pow"), {fx, Tensor::scalar<float>(2.0f)})),
            (std::vector<float>{4, 81, 4}));
  EXPECT_THROW(run1(binary("Pow"), {Tensor::from_vector<bool>({1}, {true}), fy}), Error);
}

// Exponents 2 and 1 of floats skip std::pow (as PyTorch and ONNX Runtime do): x^1 is x, and
// x^2 is x * x, correctly rounded (glibc's pow is within 1 ulp, not always correctly rounded).
// Checked over specials, extremes and random magnitudes, with the exponent of any numeric type.
template <class T>
void expect_square_and_identity_are_exact() {
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> log_magnitude(-40.0, 40.0);
  std::vector<T> x = {T(0),
                      -T(0),
                      std::numeric_limits<T>::infinity(),
                      -std::numeric_limits<T>::infinity(),
                      std::numeric_limits<T>::quiet_NaN(),
                      std::numeric_limits<T>::max(),
                      std::numeric_limits<T>::denorm_min(),
                      std::numeric_limits<T>::min(),
                      T(-3)};
  for (int i = 0; i < 2000; ++i)
    x.push_back(static_cast<T>((i % 2 ? -1 : 1) * std::exp(log_magnitude(rng))));
  const Tensor base = Tensor::from_vector<T>({static_cast<int64_t>(x.size())}, x);
  for (const Tensor& exponent :
       {Tensor::scalar<T>(T(2)), Tensor::scalar<T>(T(1)), Tensor::scalar<int64_t>(2),
        Tensor::from_vector<float>({1}, {1})}) {
    const bool square = exponent.dtype() == DType::Int64 ||
                        (exponent.dtype() == DType::Float32 ? exponent.data<float>()[0]
                                                            : exponent.data<T>()[0]) == 2;
    const Tensor y = run1(binary("Pow"), {base, exponent}, 15);
    ASSERT_EQ(y.dtype(), base.dtype());
    for (size_t i = 0; i < x.size(); ++i) {
      const T got = y.data<T>()[i];
      const T pow = std::pow(x[i], square ? T(2) : T(1));
      SCOPED_TRACE(::testing::Message() << x[i] << (square ? "^2" : "^1"));
      if (std::isnan(pow)) {
        EXPECT_TRUE(std::isnan(got));
        continue;
      }
      EXPECT_EQ(std::signbit(got), std::signbit(pow));
      if (!square || !std::isfinite(got) || got == 0) {
        EXPECT_EQ(got, pow);
        continue;
      }
      // Correctly rounded: the exact error x * x - got (an fma computes it exactly) is at most
      // half an ulp of got; and within one ulp of std::pow.
      const T ulp = std::nextafter(got, std::numeric_limits<T>::infinity()) - got;
      EXPECT_LE(std::abs(std::fma(x[i], x[i], -got)), ulp / 2);
      EXPECT_LE(std::abs(got - pow), ulp);
    }
  }
}

// Exp of float32 is correctly rounded: against long double's expl rounded once to float, over
// every 997th float in [-110, 95] (every magnitude, denormal results and both overflows
// included) and the specials; through the kernel, as models run it.
TEST(ElementwiseUnary, ExpOfFloatIsCorrectlyRounded) {
  std::vector<float> x = {std::numeric_limits<float>::infinity(),
                          -std::numeric_limits<float>::infinity(),
                          std::numeric_limits<float>::quiet_NaN(),
                          0.0f,
                          -0.0f,
                          88.72283f,
                          88.72284f,
                          -103.97208f,
                          -103.97209f,
                          -87.33655f};
  for (uint64_t bits = 0; bits <= 0xFFFFFFFFu; bits += 997) {
    const float f = std::bit_cast<float>(static_cast<uint32_t>(bits));
    if (f > -110.0f && f < 95.0f) x.push_back(f);
  }
  const Tensor y =
      run1(unary("Exp"), {Tensor::from_vector<float>({static_cast<int64_t>(x.size())}, x)});
  size_t wrong = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    const float want = static_cast<float>(std::exp(static_cast<long double>(x[i])));
    const float got = y.data<float>()[i];
    const bool same = std::isnan(want)
                          ? std::isnan(got)
                          : std::bit_cast<uint32_t>(got) == std::bit_cast<uint32_t>(want);
    if (!same && ++wrong <= 5) ADD_FAILURE() << "exp(" << x[i] << ") = " << got << ", not " << want;
  }
  EXPECT_EQ(wrong, 0u) << "of " << x.size();
  EXPECT_GT(x.size(), 2000000u);
}

TEST(ElementwiseBinary, PowBySquareAndByOneAreExact) {
  expect_square_and_identity_are_exact<float>();
  expect_square_and_identity_are_exact<double>();
  // Other single exponents and per-element exponents still go through std::pow.
  const Tensor x = Tensor::from_vector<float>({3}, {2.0f, 9.0f, 4.0f});
  EXPECT_EQ(values<float>(run1(binary("Pow"), {x, Tensor::scalar<float>(0.5f)})),
            (std::vector<float>{std::pow(2.0f, 0.5f), 3, 2}));
  EXPECT_EQ(values<float>(run1(binary("Pow"), {x, Tensor::from_vector<float>({3}, {2, 1, 3})})),
            (std::vector<float>{4, 9, 64}));
}

TEST(ElementwiseBinary, BitShiftAndBitwise) {
  Tensor x = Tensor::from_vector<uint8_t>({4}, {16, 4, 1, 255});
  Tensor s = Tensor::from_vector<uint8_t>({4}, {1, 2, 8, 4});
  Node left = binary("BitShift");
  left.attributes["direction"] = Attribute::of_string("LEFT");
  EXPECT_EQ(values<uint8_t>(run1(left, {x, s})), (std::vector<uint8_t>{32, 16, 0, 240}));
  Node right = binary("BitShift");
  right.attributes["direction"] = Attribute::of_string("RIGHT");
  EXPECT_EQ(values<uint8_t>(run1(right, {x, s})), (std::vector<uint8_t>{8, 1, 0, 15}));
  Node bad = binary("BitShift");
  bad.attributes["direction"] = Attribute::of_string("UP");
  EXPECT_THROW(run1(bad, {x, s}), Error);
  EXPECT_THROW(
      run1(left, {Tensor::from_vector<int32_t>({1}, {1}), Tensor::from_vector<int32_t>({1}, {1})}),
      Error);
  Tensor a = Tensor::from_vector<int32_t>({2}, {0b1100, -1});
  Tensor b = Tensor::from_vector<int32_t>({1}, {0b1010});
  EXPECT_EQ(values<int32_t>(run1(binary("BitwiseAnd"), {a, b}, 18)), (std::vector<int32_t>{8, 10}));
  EXPECT_EQ(values<int32_t>(run1(binary("BitwiseOr"), {a, b}, 18)), (std::vector<int32_t>{14, -1}));
  EXPECT_EQ(values<int32_t>(run1(binary("BitwiseXor"), {a, b}, 18)),
            (std::vector<int32_t>{6, ~10}));
}

TEST(ElementwiseBinary, ShapeAndDtypeErrors) {
  Tensor a = Tensor::zeros({2, 3}, DType::Float32);
  EXPECT_THROW(run1(binary("Add"), {a, Tensor::zeros({4}, DType::Float32)}), Error);
  EXPECT_THROW(run1(binary("Add"), {a, Tensor::zeros({3}, DType::Float64)}), Error);
  EXPECT_THROW(run1(binary("Add"), {Tensor::from_vector<bool>({1}, {true}),
                                    Tensor::from_vector<bool>({1}, {true})}),
               Error);
}

TEST(ElementwiseBinary, LegacyBroadcastAttributes) {
  Tensor a = Tensor::from_vector<float>({2, 3}, {1, 2, 3, 4, 5, 6});
  // broadcast=1 without axis: trailing alignment.
  Node trailing = binary("Add");
  trailing.attributes["broadcast"] = Attribute::of_int(1);
  EXPECT_EQ(values<float>(run1(trailing, {a, Tensor::from_vector<float>({3}, {10, 20, 30})}, 6)),
            (std::vector<float>{11, 22, 33, 14, 25, 36}));
  // axis=0 aligns a [2] vector with A's first dim (numpy would not).
  Node axis0 = binary("Mul");
  axis0.attributes["broadcast"] = Attribute::of_int(1);
  axis0.attributes["axis"] = Attribute::of_int(0);
  EXPECT_EQ(values<float>(run1(axis0, {a, Tensor::from_vector<float>({2}, {10, 100})}, 6)),
            (std::vector<float>{10, 20, 30, 400, 500, 600}));
  Tensor col = Tensor::from_vector<float>({2, 1}, {1, 2});
  EXPECT_EQ(values<float>(run1(axis0, {a, col}, 6)), (std::vector<float>{1, 2, 3, 8, 10, 12}));
  Node neg_axis = binary("Sub");
  neg_axis.attributes["broadcast"] = Attribute::of_int(1);
  neg_axis.attributes["axis"] = Attribute::of_int(-1);
  EXPECT_EQ(values<float>(run1(neg_axis, {a, Tensor::from_vector<float>({3}, {1, 1, 1})}, 6)),
            (std::vector<float>{0, 1, 2, 3, 4, 5}));
  // Scalar B with broadcast=1.
  EXPECT_EQ(values<float>(run1(trailing, {a, Tensor::scalar<float>(1.0f)}, 6)),
            (std::vector<float>{2, 3, 4, 5, 6, 7}));
  // Comparisons and logic share the legacy rules.
  Node greater = binary("Greater");
  greater.attributes["broadcast"] = Attribute::of_int(1);
  EXPECT_EQ(values<bool>(run1(greater, {a, Tensor::from_vector<float>({3}, {2, 2, 2})}, 1)),
            (std::vector<bool>{false, false, true, true, true, true}));
  // Without broadcast=1 the shapes must match.
  EXPECT_THROW(run1(binary("Add"), {a, Tensor::from_vector<float>({3}, {1, 1, 1})}, 6), Error);
  // An axis that does not fit B into A.
  Node bad_axis = binary("Add");
  bad_axis.attributes["broadcast"] = Attribute::of_int(1);
  bad_axis.attributes["axis"] = Attribute::of_int(1);
  EXPECT_THROW(run1(bad_axis, {a, Tensor::from_vector<float>({2}, {1, 1})}, 6), Error);
  EXPECT_THROW(run1(trailing, {a, Tensor::zeros({1, 2, 3}, DType::Float32)}, 6), Error);
}

TEST(ElementwiseBinary, Float16Arithmetic) {
  Tensor a = Tensor::from_vector<Float16>({2}, {Float16(1.5f), Float16(-2.0f)});
  Tensor b = Tensor::from_vector<Float16>({1}, {Float16(0.5f)});
  Tensor y = run1(binary("Add"), {a, b});
  EXPECT_EQ(y.dtype(), DType::Float16);
  EXPECT_EQ(static_cast<float>(y.data<Float16>()[0]), 2.0f);
  EXPECT_EQ(static_cast<float>(y.data<Float16>()[1]), -1.5f);
}

// ---- comparisons and logic -------------------------------------------------------------

TEST(ElementwiseCompare, ComparisonsGiveBool) {
  Tensor a = Tensor::from_vector<float>({2, 3}, {1, 2, 3, 4, kNaN, 6});
  Tensor b = Tensor::from_vector<float>({3}, {2, 2, 2});
  const std::vector<std::pair<std::string, std::vector<bool>>> cases = {
      {"Equal", {false, true, false, false, false, false}},
      {"Less", {true, false, false, false, false, false}},
      {"LessOrEqual", {true, true, false, false, false, false}},
      {"Greater", {false, false, true, true, false, true}},
      {"GreaterOrEqual", {false, true, true, true, false, true}},
  };
  for (const auto& [op, want] : cases) {
    Tensor y = run1(binary(op), {a, b});
    EXPECT_EQ(y.dtype(), DType::Bool) << op;
    EXPECT_EQ(values<bool>(y), want) << op;
  }
  Tensor i = Tensor::from_vector<int64_t>({3}, {1, 5, -3});
  EXPECT_EQ(values<bool>(run1(binary("Equal"), {i, Tensor::scalar<int64_t>(5)})),
            (std::vector<bool>{false, true, false}));
  Tensor t = Tensor::from_vector<bool>({2}, {true, false});
  EXPECT_EQ(values<bool>(run1(binary("Equal"), {t, Tensor::scalar<bool>(false)})),
            (std::vector<bool>{false, true}));
  EXPECT_THROW(run1(binary("Less"), {t, t}), Error);
}

TEST(ElementwiseCompare, LogicBroadcasts) {
  Tensor a = Tensor::from_vector<bool>({2, 2}, {true, true, false, false});
  Tensor b = Tensor::from_vector<bool>({2}, {true, false});
  EXPECT_EQ(values<bool>(run1(binary("And"), {a, b})),
            (std::vector<bool>{true, false, false, false}));
  EXPECT_EQ(values<bool>(run1(binary("Or"), {a, b})), (std::vector<bool>{true, true, true, false}));
  EXPECT_EQ(values<bool>(run1(binary("Xor"), {a, b})),
            (std::vector<bool>{false, true, true, false}));
  EXPECT_THROW(
      run1(binary("And"), {Tensor::zeros({2}, DType::Float32), Tensor::zeros({2}, DType::Float32)}),
      Error);
}

// ---- variadic --------------------------------------------------------------------------

TEST(ElementwiseVariadic, SumMeanMinMaxBroadcast) {
  Tensor a = Tensor::from_vector<float>({2, 1}, {1, 2});
  Tensor b = Tensor::from_vector<float>({3}, {10, 20, 30});
  Tensor c = Tensor::scalar<float>(100.0f);
  Node sum = make_node("Sum", {"a", "b", "c"}, {"y"});
  Tensor s = run1(sum, {a, b, c});
  EXPECT_EQ(s.shape(), (Shape{2, 3}));
  EXPECT_EQ(values<float>(s), (std::vector<float>{111, 121, 131, 112, 122, 132}));
  Tensor m = run1(make_node("Mean", {"a", "b", "c"}, {"y"}), {a, b, c});
  EXPECT_FLOAT_EQ(m.data<float>()[0], 37.0f);
  EXPECT_FLOAT_EQ(m.data<float>()[5], 44.0f);
  Tensor mx =
      run1(make_node("Max", {"a", "b"}, {"y"}), {a, Tensor::from_vector<float>({3}, {0, 1.5f, 3})});
  EXPECT_EQ(values<float>(mx), (std::vector<float>{1, 1.5f, 3, 2, 2, 3}));
  Tensor mn =
      run1(make_node("Min", {"a", "b"}, {"y"}), {a, Tensor::from_vector<float>({3}, {0, 1.5f, 3})});
  EXPECT_EQ(values<float>(mn), (std::vector<float>{0, 1, 1, 0, 1.5f, 2}));
}

TEST(ElementwiseVariadic, SingleInputAndIntegersAndNaN) {
  Tensor a = Tensor::from_vector<float>({3}, {1, kNaN, 3});
  EXPECT_EQ(values<float>(
                run1(make_node("Sum", {"a"}, {"y"}), {Tensor::from_vector<float>({2}, {1, 2})})),
            (std::vector<float>{1, 2}));
  Tensor mx =
      run1(make_node("Max", {"a", "b"}, {"y"}), {a, Tensor::from_vector<float>({3}, {kNaN, 0, 0})});
  EXPECT_TRUE(std::isnan(mx.data<float>()[0]));
  EXPECT_TRUE(std::isnan(mx.data<float>()[1]));
  EXPECT_EQ(mx.data<float>()[2], 3.0f);
  Tensor i =
      run1(make_node("Min", {"a", "b", "c"}, {"y"}),
           {Tensor::from_vector<uint64_t>({2}, {5, 1}), Tensor::from_vector<uint64_t>({2}, {3, 9}),
            Tensor::from_vector<uint64_t>({1}, {4})});
  EXPECT_EQ(values<uint64_t>(i), (std::vector<uint64_t>{3, 1}));
  Tensor h = run1(make_node("Mean", {"a", "b"}, {"y"}),
                  {Tensor::from_vector<Float16>({1}, {Float16(1.0f)}),
                   Tensor::from_vector<Float16>({1}, {Float16(2.0f)})});
  EXPECT_EQ(h.dtype(), DType::Float16);
  EXPECT_EQ(static_cast<float>(h.data<Float16>()[0]), 1.5f);
}

TEST(ElementwiseVariadic, Errors) {
  EXPECT_THROW(run1(make_node("Sum", {"a", "b"}, {"y"}),
                    {Tensor::zeros({2}, DType::Float32), Tensor::zeros({3}, DType::Float32)}),
               Error);
  EXPECT_THROW(run1(make_node("Max", {"a", "b"}, {"y"}),
                    {Tensor::zeros({2}, DType::Float32), Tensor::zeros({2}, DType::Int32)}),
               Error);
  EXPECT_THROW(run1(make_node("Mean", {"a"}, {"y"}), {Tensor::zeros({2}, DType::Int32)}), Error);
}

// ---- Where -----------------------------------------------------------------------------

TEST(ElementwiseWhere, BroadcastsAllThree) {
  Tensor cond = Tensor::from_vector<bool>({2, 1}, {true, false});
  Tensor x = Tensor::from_vector<int64_t>({3}, {1, 2, 3});
  Tensor y = Tensor::scalar<int64_t>(-1);
  Tensor out = run1(make_node("Where", {"c", "x", "y"}, {"o"}), {cond, x, y});
  EXPECT_EQ(out.shape(), (Shape{2, 3}));
  EXPECT_EQ(values<int64_t>(out), (std::vector<int64_t>{1, 2, 3, -1, -1, -1}));
  Tensor c2 = Tensor::from_vector<bool>({4}, {true, false, false, true});
  Tensor fx = Tensor::from_vector<float>({4}, {1, 2, 3, 4});
  Tensor fy = Tensor::from_vector<float>({4}, {-1, -2, -3, -4});
  EXPECT_EQ(values<float>(run1(make_node("Where", {"c", "x", "y"}, {"o"}), {c2, fx, fy})),
            (std::vector<float>{1, -2, -3, 4}));
  Tensor bx = Tensor::from_vector<bool>({1}, {true});
  EXPECT_EQ(values<bool>(run1(make_node("Where", {"c", "x", "y"}, {"o"}),
                              {c2, bx, Tensor::scalar<bool>(false)})),
            (std::vector<bool>{true, false, false, true}));
}

TEST(ElementwiseWhere, Errors) {
  Node n = make_node("Where", {"c", "x", "y"}, {"o"});
  Tensor c = Tensor::from_vector<bool>({2}, {true, false});
  EXPECT_THROW(run1(n, {Tensor::zeros({2}, DType::Float32), Tensor::zeros({2}, DType::Float32),
                        Tensor::zeros({2}, DType::Float32)}),
               Error);
  EXPECT_THROW(run1(n, {c, Tensor::zeros({2}, DType::Float32), Tensor::zeros({2}, DType::Int32)}),
               Error);
  EXPECT_THROW(run1(n, {c, Tensor::zeros({3}, DType::Float32), Tensor::zeros({2}, DType::Float32)}),
               Error);
}

// ---- Clip ------------------------------------------------------------------------------

TEST(ElementwiseClip, AttributesBeforeOpset11) {
  Node n = unary("Clip");
  n.attributes["min"] = Attribute::of_float(-0.5f);
  n.attributes["max"] = Attribute::of_float(0.5f);
  Tensor x = Tensor::from_vector<float>({4}, {-1, -0.25f, 0.25f, 1});
  EXPECT_EQ(values<float>(run1(n, {x}, 6)), (std::vector<float>{-0.5f, -0.25f, 0.25f, 0.5f}));
  Node only_min = unary("Clip");
  only_min.attributes["min"] = Attribute::of_float(0.0f);
  EXPECT_EQ(values<float>(run1(only_min, {x}, 6)), (std::vector<float>{0, 0, 0.25f, 1}));
}

TEST(ElementwiseClip, OptionalInputsFromOpset11) {
  Tensor x = Tensor::from_vector<float>({4}, {-2, -0.5f, 0.5f, 2});
  Tensor lo = Tensor::scalar<float>(-1.0f);
  Tensor hi = Tensor::scalar<float>(1.0f);
  EXPECT_EQ(values<float>(run1(make_node("Clip", {"x", "lo", "hi"}, {"y"}), {x, lo, hi}, 13)),
            (std::vector<float>{-1, -0.5f, 0.5f, 1}));
  EXPECT_EQ(values<float>(run1(make_node("Clip", {"x", "", "hi"}, {"y"}), {x, hi}, 13)),
            (std::vector<float>{-2, -0.5f, 0.5f, 1}));
  EXPECT_EQ(values<float>(run1(make_node("Clip", {"x", "lo"}, {"y"}), {x, lo}, 11)),
            (std::vector<float>{-1, -0.5f, 0.5f, 2}));
  EXPECT_EQ(values<float>(run1(make_node("Clip", {"x"}, {"y"}), {x}, 13)), values<float>(x));
  // min > max: everything becomes max.
  EXPECT_EQ(values<float>(run1(make_node("Clip", {"x", "lo", "hi"}, {"y"}), {x, hi, lo}, 13)),
            (std::vector<float>{-1, -1, -1, -1}));
  Tensor i = Tensor::from_vector<int8_t>({3}, {-100, 5, 100});
  EXPECT_EQ(values<int8_t>(run1(make_node("Clip", {"x", "lo", "hi"}, {"y"}),
                                {i, Tensor::scalar<int8_t>(-10), Tensor::scalar<int8_t>(10)}, 13)),
            (std::vector<int8_t>{-10, 5, 10}));
}

TEST(ElementwiseClip, Errors) {
  Tensor x = Tensor::zeros({3}, DType::Float32);
  EXPECT_THROW(
      run1(make_node("Clip", {"x", "lo"}, {"y"}), {x, Tensor::zeros({2}, DType::Float32)}, 13),
      Error);
  EXPECT_THROW(run1(make_node("Clip", {"x", "lo"}, {"y"}), {x, Tensor::scalar<double>(0.0)}, 13),
               Error);
  EXPECT_THROW(run1(unary("Clip"), {Tensor::zeros({3}, DType::Int32)}, 6), Error);
}

// ---- Cast ------------------------------------------------------------------------------

Node cast_to(DType t) {
  Node n = unary("Cast");
  n.attributes["to"] = Attribute::of_int(static_cast<int64_t>(t));
  return n;
}

TEST(ElementwiseCast, FloatToIntegerTruncatesAndSaturates) {
  Tensor x = Tensor::from_vector<float>({6}, {1.9f, -1.9f, 300.0f, -300.0f, kNaN, kInf});
  EXPECT_EQ(values<int8_t>(run1(cast_to(DType::Int8), {x})),
            (std::vector<int8_t>{1, -1, 127, -128, 0, 127}));
  EXPECT_EQ(values<int64_t>(run1(cast_to(DType::Int64), {x})),
            (std::vector<int64_t>{1, -1, 300, -300, 0, std::numeric_limits<int64_t>::max()}));
  EXPECT_EQ(values<bool>(
                run1(cast_to(DType::Bool), {Tensor::from_vector<float>({3}, {0.0f, -0.5f, 2.0f})})),
            (std::vector<bool>{false, true, true}));
}

TEST(ElementwiseCast, BetweenFloatTypesAndBool) {
  Tensor b = Tensor::from_vector<bool>({2}, {true, false});
  EXPECT_EQ(values<double>(run1(cast_to(DType::Float64), {b})), (std::vector<double>{1.0, 0.0}));
  Tensor x = Tensor::from_vector<float>({3}, {0.1f, 65504.0f, 1e6f});
  Tensor h = run1(cast_to(DType::Float16), {x});
  EXPECT_EQ(h.dtype(), DType::Float16);
  EXPECT_NEAR(static_cast<float>(h.data<Float16>()[0]), 0.1f, 1e-4f);
  EXPECT_EQ(static_cast<float>(h.data<Float16>()[1]), 65504.0f);
  EXPECT_EQ(static_cast<float>(h.data<Float16>()[2]), kInf);
  Tensor back = run1(cast_to(DType::Float32), {h});
  EXPECT_EQ(back.data<float>()[1], 65504.0f);
  Tensor bf = run1(cast_to(DType::BFloat16), {Tensor::from_vector<int32_t>({2}, {3, -256})});
  EXPECT_EQ(static_cast<float>(bf.data<BFloat16>()[0]), 3.0f);
  EXPECT_EQ(static_cast<float>(bf.data<BFloat16>()[1]), -256.0f);
  Tensor same = Tensor::from_vector<int32_t>({2}, {1, 2});
  EXPECT_EQ(values<int32_t>(run1(cast_to(DType::Int32), {same})), (std::vector<int32_t>{1, 2}));
}

TEST(ElementwiseCast, Opset1StringTarget) {
  Node n = unary("Cast");
  n.attributes["to"] = Attribute::of_string("INT32");
  EXPECT_EQ(values<int32_t>(run1(n, {Tensor::from_vector<double>({2}, {2.5, -7.0})}, 1)),
            (std::vector<int32_t>{2, -7}));
  n.attributes["to"] = Attribute::of_string("QUATERNION");
  EXPECT_THROW(run1(n, {Tensor::zeros({1}, DType::Float32)}, 1), Error);
}

// Casts to and from string are covered in string_test.cpp.
TEST(ElementwiseCast, RefusesUnknownTargets) {
  Node n = unary("Cast");
  n.attributes["to"] = Attribute::of_int(99);
  EXPECT_THROW(run1(n, {Tensor::zeros({1}, DType::Float32)}), Error);
  EXPECT_THROW(run1(unary("Cast"), {Tensor::zeros({1}, DType::Float32)}), Error);
}

TEST(ElementwiseCast, CastLikeTakesTheSecondInputsDtype) {
  Node n = make_node("CastLike", {"x", "like"}, {"y"});
  Tensor y = run1(
      n, {Tensor::from_vector<double>({2}, {1.5, -2.5}), Tensor::zeros({1}, DType::Int16)}, 15);
  EXPECT_EQ(y.dtype(), DType::Int16);
  EXPECT_EQ(values<int16_t>(y), (std::vector<int16_t>{1, -2}));
}

}  // namespace
}  // namespace dprun
