// Conv, ConvTranspose, MatMul, Gemm, pooling, MaxUnpool, Resize/Upsample, GridSample:
// hand-computed cases through the real registry, and oneDNN fast paths compared with the
// reference kernels.
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <random>
#include <thread>

#include "engine/error.h"
#include "kernel_test_util.h"
#include "op_test_util.h"
#include "ops/conv/conv_backward_weights.h"

namespace dprun {
namespace {

using testing::make_node;
using testing::run_impl;
using testing::run_node;

std::vector<float> iota_values(int64_t n, float start = 0) {
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = start + static_cast<float>(i);
  return v;
}

Tensor random_tensor(const Shape& shape, std::mt19937& rng) {
  std::uniform_real_distribution<float> dist(-1.f, 1.f);
  std::vector<float> v(static_cast<size_t>(shape_numel(shape)));
  for (float& x : v) x = dist(rng);
  return Tensor::from_vector<float>(shape, v);
}

using testing::expect_values;

/// Runs `node` through the "onednn" and "reference" kernels and compares every output.
void expect_impls_agree(const Node& node, const std::vector<Tensor>& inputs, int64_t opset = 13,
                        int threads = 2) {
  auto fast = run_impl(node, inputs, opset, "onednn", threads);
  auto ref = run_impl(node, inputs, opset, "reference", threads);
  ASSERT_EQ(fast.size(), ref.size());
  for (size_t o = 0; o < ref.size(); ++o) {
    ASSERT_EQ(shape_to_string(fast[o].shape()), shape_to_string(ref[o].shape()));
    for (int64_t i = 0; i < ref[o].numel(); ++i) {
      double r = ref[o].item_as_double(i), f = fast[o].item_as_double(i);
      ASSERT_NEAR(f, r, 1e-4 * (1 + std::abs(r))) << "output " << o << " element " << i;
    }
  }
}

// ---------------------------------------------------------------------------------- Conv

TEST(NnConv, BasicWithPadding) {
  Node n = make_node("Conv", {"x", "w"}, {"y"});
  n.attributes["kernel_shape"] = Attribute::of_ints({3, 3});
  n.attributes["pads"] = Attribute::of_ints({1, 1, 1, 1});
  auto x = Tensor::from_vector<float>({1, 1, 5, 5}, iota_values(25));
  auto w = Tensor::from_vector<float>({1, 1, 3, 3}, std::vector<float>(9, 1.f));
  auto y = run_node(n, {x, w}, 11);
  expect_values(y[0], {1, 1, 5, 5}, {12,  21, 27, 33,  24,  33,  54,  63, 72,  51,  63,  99, 108,
                                     117, 81, 93, 144, 153, 162, 111, 72, 111, 117, 123, 84});
  auto ref = run_impl(n, {x, w}, 11, "reference");
  expect_values(ref[0], {1, 1, 5, 5}, [&] {
    std::vector<double> v;
    for (int64_t i = 0; i < 25; ++i) v.push_back(y[0].item_as_double(i));
    return v;
  }());
}

TEST(NnConv, StridesAsymmetricPadsBiasGroups) {
  // Two groups of one channel each, stride 2, bias.
  Node n = make_node("Conv", {"x", "w", "b"}, {"y"});
  n.attributes["group"] = Attribute::of_int(2);
  n.attributes["strides"] = Attribute::of_ints({2});
  n.attributes["pads"] = Attribute::of_ints({1, 0});
  auto x = Tensor::from_vector<float>({1, 2, 5}, {1, 2, 3, 4, 5, 10, 20, 30, 40, 50});
  auto w = Tensor::from_vector<float>({2, 1, 2}, {1, 1, 1, -1});
  auto b = Tensor::from_vector<float>({2}, {0.5f, -1.f});
  for (const char* impl : {"reference", "onednn"}) {
    auto y = run_impl(n, {x, w, b}, 11, impl);
    // Padded x0: [0,1,2,3,4,5]; windows at 0,2,4 -> sums 1,5,9 (+0.5). Channel 2 diff: 0-10,
    // 20-30, 40-50 -> -10,-10,-10 (-1).
    expect_values(y[0], {1, 2, 3}, {1.5, 5.5, 9.5, -11, -11, -11});
  }
}

TEST(NnConv, AutoPadSameLowerAndDilations) {
  Node n = make_node("Conv", {"x", "w"}, {"y"});
  n.attributes["auto_pad"] = Attribute::of_string("SAME_LOWER");
  n.attributes["dilations"] = Attribute::of_ints({3});
  auto x = Tensor::from_vector<float>({1, 1, 4}, {1, 2, 3, 4});
  auto w = Tensor::from_vector<float>({1, 1, 2}, {1, 10});
  // Extent 4, total pad 3, the larger half first: [0, 0, 1, 2, 3, 4, 0] -> p[i] + 10 p[i+3].
  Node upper = n;
  upper.attributes["auto_pad"] = Attribute::of_string("SAME_UPPER");  // [0, 1, 2, 3, 4, 0, 0]
  for (const char* impl : {"reference", "onednn"}) {
    expect_values(run_impl(n, {x, w}, 11, impl)[0], {1, 1, 4}, {20, 30, 41, 2});
    expect_values(run_impl(upper, {x, w}, 11, impl)[0], {1, 1, 4}, {30, 41, 2, 3});
  }
}

TEST(NnConv, Errors) {
  Node n = make_node("Conv", {"x", "w"}, {"y"});
  auto x = Tensor::from_vector<float>({1, 2, 4}, iota_values(8));
  auto w = Tensor::from_vector<float>({1, 3, 2}, iota_values(6));
  EXPECT_THROW(run_node(n, {x, w}, 11), Error);  // channel mismatch
  auto w2 = Tensor::from_vector<float>({1, 2, 5}, iota_values(10));
  EXPECT_THROW(run_node(n, {x, w2}, 11), Error);  // kernel larger than input
  Node bad = n;
  bad.attributes["auto_pad"] = Attribute::of_string("SIDEWAYS");
  EXPECT_THROW(run_node(bad, {x, Tensor::from_vector<float>({1, 2, 2}, iota_values(4))}, 11),
               Error);
  Node strides = n;
  strides.attributes["strides"] = Attribute::of_ints({1, 1});
  EXPECT_THROW(run_node(strides, {x, Tensor::from_vector<float>({1, 2, 2}, iota_values(4))}, 11),
               Error);
}

TEST(NnConv, Float64) {
  Node n = make_node("Conv", {"x", "w"}, {"y"});
  auto x = Tensor::from_vector<double>({1, 1, 3}, {1, 2, 3});
  auto w = Tensor::from_vector<double>({1, 1, 2}, {1, 2});
  auto y = run_node(n, {x, w}, 11);
  EXPECT_EQ(y[0].dtype(), DType::Float64);
  expect_values(y[0], {1, 1, 2}, {5, 8});
}

TEST(NnConv, OnednnMatchesReference) {
  std::mt19937 rng(1);
  struct Case {
    Shape x, w;
    std::vector<int64_t> strides, pads, dilations;
    int64_t group;
    std::string auto_pad;
    bool bias;
  };
  std::vector<Case> cases = {
      {{2, 3, 9}, {4, 3, 3}, {1}, {1, 1}, {1}, 1, "", true},
      {{1, 4, 11}, {4, 2, 3}, {2}, {0, 2}, {2}, 2, "", false},
      {{2, 3, 8, 7}, {5, 3, 3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, 1, "", true},
      {{1, 4, 9, 9}, {6, 2, 3, 2}, {2, 1}, {1, 0, 2, 1}, {1, 2}, 2, "", true},
      {{2, 8, 10, 10}, {8, 1, 3, 3}, {1, 1}, {}, {1, 1}, 8, "SAME_UPPER", true},  // depthwise
      {{1, 3, 7, 6}, {2, 3, 2, 2}, {2, 2}, {}, {1, 1}, 1, "SAME_LOWER", false},
      {{1, 3, 7, 6}, {2, 3, 3, 3}, {2, 2}, {}, {2, 1}, 1, "VALID", true},
      {{1, 16, 14, 14}, {32, 16, 1, 1}, {1, 1}, {}, {1, 1}, 1, "", true},
      {{1, 2, 5, 6, 7}, {3, 2, 3, 2, 3}, {1, 2, 1}, {1, 0, 1, 1, 1, 0}, {1, 1, 2}, 1, "", true},
      {{2, 4, 6, 5, 4}, {4, 1, 2, 2, 2}, {2, 1, 1}, {}, {1, 1, 1}, 4, "SAME_UPPER", false},
  };
  for (const Case& c : cases) {
    Node n = make_node("Conv", {"x", "w", c.bias ? "b" : ""}, {"y"});
    n.attributes["strides"] = Attribute::of_ints(c.strides);
    if (!c.pads.empty()) n.attributes["pads"] = Attribute::of_ints(c.pads);
    n.attributes["dilations"] = Attribute::of_ints(c.dilations);
    n.attributes["group"] = Attribute::of_int(c.group);
    if (!c.auto_pad.empty()) n.attributes["auto_pad"] = Attribute::of_string(c.auto_pad);
    std::vector<Tensor> in = {random_tensor(c.x, rng), random_tensor(c.w, rng)};
    if (c.bias) in.push_back(random_tensor({c.w[0]}, rng));
    SCOPED_TRACE(shape_to_string(c.x) + " w " + shape_to_string(c.w));
    expect_impls_agree(n, in, 11);
    // A second call with another batch size exercises the per-shape primitive cache.
    Shape x2 = c.x;
    x2[0] += 1;
    in[0] = random_tensor(x2, rng);
    expect_impls_agree(n, in, 11);
  }
}

// Conv shaped like a weight gradient (conv_grad.cpp's dW = Conv(X^T, dY^T), forward strides
// as dilations, forward dilations as strides) runs as oneDNN's backward-weights primitive.
TEST(NnConv, WeightGradientShapesMatchReference) {
  std::mt19937 rng(2);
  struct Case {
    Shape a, b;
    std::vector<int64_t> strides, pads, dilations;
  };
  std::vector<Case> cases = {
      // forward X [3, 4, 9, 9], W [5, 4, 3, 3], stride 1, pads 1
      {{4, 3, 9, 9}, {5, 3, 9, 9}, {1, 1}, {1, 1, 1, 1}, {1, 1}},
      // forward stride 2: the correlation extends past the 3x3 kernel (out 3x4)
      {{3, 2, 9, 8}, {4, 2, 5, 4}, {1, 1}, {1, 1, 1, 1}, {2, 2}},
      // forward dilation 2, asymmetric pads
      {{3, 2, 10, 9}, {4, 2, 7, 6}, {2, 2}, {1, 0, 0, 1}, {1, 1}},
      // 1-D and 3-D
      {{3, 2, 12}, {4, 2, 10}, {1}, {0, 0}, {1}},
      {{2, 3, 6, 5, 6}, {4, 3, 6, 5, 6}, {1, 1, 1}, {1, 1, 1, 1, 1, 1}, {1, 1, 1}},
  };
  for (const Case& c : cases) {
    Node n = make_node("Conv", {"x", "w"}, {"y"});
    n.attributes["strides"] = Attribute::of_ints(c.strides);
    n.attributes["pads"] = Attribute::of_ints(c.pads);
    n.attributes["dilations"] = Attribute::of_ints(c.dilations);
    SCOPED_TRACE(shape_to_string(c.a) + " w " + shape_to_string(c.b));
    WindowAttrs attrs;
    attrs.parse(n);
    std::vector<int64_t> in(c.a.begin() + 2, c.a.end()), kernel(c.b.begin() + 2, c.b.end());
    WindowGeometry g = attrs.resolve(n, in, kernel);
    EXPECT_TRUE(onednn::prefer_backward_weights(c.a, c.b, g));
    EXPECT_TRUE(onednn::build_backward_weights(c.a, c.b, g).usable);
    expect_impls_agree(n, {random_tensor(c.a, rng), random_tensor(c.b, rng)}, 11);
  }
  // An ordinary convolution keeps the forward primitive.
  Node n = make_node("Conv", {"x", "w"}, {"y"});
  WindowAttrs attrs;
  attrs.parse(n);
  WindowGeometry g = attrs.resolve(n, {9, 9}, {3, 3});
  EXPECT_FALSE(onednn::prefer_backward_weights({2, 3, 9, 9}, {4, 3, 3, 3}, g));
}

TEST(NnConv, ConvInteger) {
  Node n = make_node("ConvInteger", {"x", "w", "xz"}, {"y"});
  n.attributes["pads"] = Attribute::of_ints({1, 1, 1, 1});
  auto x = Tensor::from_vector<uint8_t>({1, 1, 2, 2}, {2, 3, 4, 5});
  auto w = Tensor::from_vector<uint8_t>({1, 1, 2, 2}, {1, 1, 1, 1});
  auto xz = Tensor::scalar<uint8_t>(1);
  // x - 1 = [1, 2; 3, 4] padded with zeros, 2x2 box sums -> 3x3.
  auto y = run_node(n, {x, w, xz}, 10);
  EXPECT_EQ(y[0].dtype(), DType::Int32);
  expect_values(y[0], {1, 1, 3, 3}, {1, 3, 2, 4, 10, 6, 3, 7, 4});
  Node bad = make_node("ConvInteger", {"x", "w", "xz"}, {"y"});
  EXPECT_THROW(run_node(bad, {x, w, Tensor::from_vector<uint8_t>({2}, {1, 2})}, 10), Error);
}

// ------------------------------------------------------------------------- ConvTranspose

TEST(NnConvTranspose, OneDimensional) {
  Node n = make_node("ConvTranspose", {"x", "w"}, {"y"});
  auto x = Tensor::from_vector<float>({1, 1, 3}, {0, 1, 2});
  auto w = Tensor::from_vector<float>({1, 2, 3}, {1, 1, 1, 1, 1, 1});
  for (const char* impl : {"reference", "onednn"})
    expect_values(run_impl(n, {x, w}, 11, impl)[0], {1, 2, 5}, {0, 1, 3, 3, 2, 0, 1, 3, 3, 2});
}

TEST(NnConvTranspose, StridesPadsOutputPaddingAndShape) {
  auto x = Tensor::from_vector<float>({1, 1, 2}, {1, 2});
  auto w = Tensor::from_vector<float>({1, 1, 2}, {1, 10});
  Node n = make_node("ConvTranspose", {"x", "w"}, {"y"});
  n.attributes["strides"] = Attribute::of_ints({3});
  // Full output: [1, 10, 0, 2, 20] (length 5); output_padding adds one trailing zero.
  Node op = n;
  op.attributes["output_padding"] = Attribute::of_ints({1});
  Node pads = n;
  pads.attributes["pads"] = Attribute::of_ints({1, 1});
  Node shape = n;
  shape.attributes["output_shape"] = Attribute::of_ints({7});
  for (const char* impl : {"reference", "onednn"}) {
    expect_values(run_impl(n, {x, w}, 11, impl)[0], {1, 1, 5}, {1, 10, 0, 2, 20});
    expect_values(run_impl(op, {x, w}, 11, impl)[0], {1, 1, 6}, {1, 10, 0, 2, 20, 0});
    expect_values(run_impl(pads, {x, w}, 11, impl)[0], {1, 1, 3}, {10, 0, 2});
    expect_values(run_impl(shape, {x, w}, 11, impl)[0], {1, 1, 7}, {1, 10, 0, 2, 20, 0, 0});
  }
  Node bad = n;
  bad.attributes["output_padding"] = Attribute::of_ints({1, 1});
  EXPECT_THROW(run_node(bad, {x, w}, 11), Error);
  EXPECT_THROW(run_node(n, {x, Tensor::from_vector<float>({2, 1, 2}, {1, 2, 3, 4})}, 11), Error);
}

TEST(NnConvTranspose, OnednnMatchesReference) {
  std::mt19937 rng(2);
  struct Case {
    Shape x, w;
    std::vector<int64_t> strides, pads, dilations, output_padding, output_shape;
    int64_t group;
    std::string auto_pad;
    bool bias;
  };
  std::vector<Case> cases = {
      {{2, 3, 5}, {3, 2, 3}, {2}, {1, 0}, {1}, {1}, {}, 1, "", true},
      {{1, 4, 6}, {4, 3, 2}, {1}, {}, {2}, {}, {}, 2, "", false},
      {{2, 3, 4, 5}, {3, 4, 3, 3}, {2, 1}, {1, 1, 0, 1}, {1, 1}, {1, 0}, {}, 1, "", true},
      {{1, 4, 5, 5}, {4, 2, 3, 3}, {3, 2}, {}, {1, 1}, {}, {16, 11}, 2, "", true},
      {{1, 2, 3, 3}, {2, 2, 3, 3}, {2, 2}, {}, {1, 1}, {}, {}, 1, "SAME_UPPER", true},
      {{1, 2, 3, 3}, {2, 2, 3, 3}, {2, 2}, {}, {1, 1}, {}, {}, 1, "SAME_LOWER", false},
      {{1, 6, 4, 4}, {6, 1, 3, 3}, {2, 2}, {1, 1, 1, 1}, {1, 1}, {1, 1}, {}, 6, "", true},
      {{1, 2, 3, 4, 3},
       {2, 3, 2, 3, 2},
       {2, 1, 2},
       {0, 1, 0, 0, 1, 1},
       {1, 1, 1},
       {},
       {},
       1,
       "",
       true},
  };
  for (const Case& c : cases) {
    Node n = make_node("ConvTranspose", {"x", "w", c.bias ? "b" : ""}, {"y"});
    n.attributes["strides"] = Attribute::of_ints(c.strides);
    if (!c.pads.empty()) n.attributes["pads"] = Attribute::of_ints(c.pads);
    n.attributes["dilations"] = Attribute::of_ints(c.dilations);
    if (!c.output_padding.empty())
      n.attributes["output_padding"] = Attribute::of_ints(c.output_padding);
    if (!c.output_shape.empty()) n.attributes["output_shape"] = Attribute::of_ints(c.output_shape);
    n.attributes["group"] = Attribute::of_int(c.group);
    if (!c.auto_pad.empty()) n.attributes["auto_pad"] = Attribute::of_string(c.auto_pad);
    std::vector<Tensor> in = {random_tensor(c.x, rng), random_tensor(c.w, rng)};
    if (c.bias) in.push_back(random_tensor({c.w[1] * c.group}, rng));
    SCOPED_TRACE(shape_to_string(c.x) + " w " + shape_to_string(c.w));
    expect_impls_agree(n, in, 11);
  }
}

// ------------------------------------------------------------------------- MatMul / Gemm

TEST(NnMatMul, TwoDimensionalAndVectors) {
  Node n = make_node("MatMul", {"a", "b"}, {"y"});
  auto a = Tensor::from_vector<float>({2, 3}, {1, 2, 3, 4, 5, 6});
  auto b = Tensor::from_vector<float>({3, 2}, {1, 0, 0, 1, 1, 1});
  expect_values(run_node(n, {a, b}, 13)[0], {2, 2}, {4, 5, 10, 11});
  auto v = Tensor::from_vector<float>({3}, {1, 1, 1});
  expect_values(run_node(n, {a, v}, 13)[0], {2}, {6, 15});
  expect_values(run_node(n, {v, b}, 13)[0], {2}, {2, 2});
  expect_values(run_node(n, {v, v}, 13)[0], {}, {3});
  auto ai = Tensor::from_vector<int64_t>({1, 2}, {3, 4});
  auto bi = Tensor::from_vector<int64_t>({2, 1}, {5, 6});
  expect_values(run_node(n, {ai, bi}, 13)[0], {1, 1}, {39});
}

TEST(NnMatMul, BatchBroadcastShapes) {
  Node n = make_node("MatMul", {"a", "b"}, {"y"});
  std::mt19937 rng(3);
  auto a = random_tensor({2, 1, 3, 4}, rng);
  auto b = random_tensor({5, 4, 2}, rng);
  auto y = run_node(n, {a, b}, 13)[0];
  ASSERT_EQ(y.shape(), (Shape{2, 5, 3, 2}));
  // Element [1, 3, 2, 1] = sum_k a[1, 0, 2, k] * b[3, k, 1].
  double expect = 0;
  for (int k = 0; k < 4; ++k)
    expect +=
        a.item_as_double(((1 * 1 + 0) * 3 + 2) * 4 + k) * b.item_as_double((3 * 4 + k) * 2 + 1);
  EXPECT_NEAR(y.item_as_double(((1 * 5 + 3) * 3 + 2) * 2 + 1), expect, 1e-5);
  EXPECT_THROW(run_node(n, {random_tensor({2, 3, 4}, rng), random_tensor({3, 4, 2}, rng)}, 13),
               Error);
  EXPECT_THROW(run_node(n, {random_tensor({3, 4}, rng), random_tensor({3, 2}, rng)}, 13), Error);
  EXPECT_THROW(run_node(n, {Tensor::scalar<float>(1), random_tensor({3, 2}, rng)}, 13), Error);
}

TEST(NnMatMul, OnednnMatchesReference) {
  std::mt19937 rng(4);
  std::vector<std::pair<Shape, Shape>> cases = {
      {{3, 4}, {4, 5}},
      {{7}, {7, 3}},
      {{2, 6}, {6}},
      {{5}, {5}},
      {{2, 3, 4}, {4, 6}},
      {{4, 5}, {3, 5, 2}},
      {{2, 1, 3, 4}, {5, 4, 2}},
      {{1, 3, 4}, {2, 4, 3}},
      {{2, 3, 4}, {2, 4, 3}},
      {{3, 1, 2, 5}, {1, 4, 5, 3}},
      {{64, 128}, {128, 96}},
      {{0, 4}, {4, 3}},
      {{3, 0}, {0, 2}},
  };
  Node n = make_node("MatMul", {"a", "b"}, {"y"});
  for (const auto& [sa, sb] : cases) {
    SCOPED_TRACE(shape_to_string(sa) + " x " + shape_to_string(sb));
    expect_impls_agree(n, {random_tensor(sa, rng), random_tensor(sb, rng)});
  }
}

TEST(NnMatMul, MatMulInteger) {
  Node n = make_node("MatMulInteger", {"a", "b", "az", "bz"}, {"y"});
  auto a = Tensor::from_vector<uint8_t>({2, 2}, {11, 12, 13, 14});
  auto b = Tensor::from_vector<int8_t>({2, 2}, {1, -1, 2, 0});
  auto az = Tensor::scalar<uint8_t>(10);
  auto bz = Tensor::from_vector<int8_t>({2}, {0, -1});
  // (a - 10) = [1 2; 3 4], (b - bz) = [1 0; 2 1].
  auto y = run_node(n, {a, b, az, bz}, 10);
  EXPECT_EQ(y[0].dtype(), DType::Int32);
  expect_values(y[0], {2, 2}, {5, 2, 11, 4});
  EXPECT_THROW(run_node(n, {a, b, az, Tensor::from_vector<int8_t>({3}, {0, 0, 0})}, 10), Error);
}

TEST(NnGemm, AttributesAndBroadcast) {
  Node n = make_node("Gemm", {"a", "b", "c"}, {"y"});
  n.attributes["transA"] = Attribute::of_int(1);
  n.attributes["transB"] = Attribute::of_int(1);
  n.attributes["alpha"] = Attribute::of_float(2.f);
  n.attributes["beta"] = Attribute::of_float(0.5f);
  auto a = Tensor::from_vector<float>({2, 2}, {1, 3, 2, 4});  // A^T = [1 2; 3 4]
  auto b = Tensor::from_vector<float>({2, 2}, {1, 1, 0, 1});  // B^T = [1 0; 1 1]
  auto c = Tensor::from_vector<float>({2}, {10, 20});
  // A^T B^T = [3 2; 7 4] -> 2x + 0.5 c.
  for (const char* impl : {"reference", "onednn"}) {
    expect_values(run_impl(n, {a, b, c}, 13, impl)[0], {2, 2}, {11, 14, 19, 18});
    expect_values(run_impl(n, {a, b, Tensor::scalar<float>(2)}, 13, impl)[0], {2, 2},
                  {7, 5, 15, 9});
    expect_values(run_impl(n, {a, b, Tensor::from_vector<float>({2, 1}, {0, 4})}, 13, impl)[0],
                  {2, 2}, {6, 4, 16, 10});
  }
  Node no_c = make_node("Gemm", {"a", "b"}, {"y"});
  expect_values(run_node(no_c, {a, b}, 13)[0], {2, 2}, {1, 4, 2, 6});
  auto d = Tensor::from_vector<double>({1, 2}, {1, 2});
  auto e = Tensor::from_vector<double>({2, 1}, {3, 4});
  expect_values(run_node(no_c, {d, e}, 13)[0], {1, 1}, {11});
  EXPECT_THROW(run_node(n, {a, b, Tensor::from_vector<float>({3}, {1, 2, 3})}, 13), Error);
  EXPECT_THROW(run_node(no_c, {a, Tensor::from_vector<float>({3, 1}, {1, 2, 3})}, 13), Error);
}

TEST(NnGemm, LegacyBroadcastAttribute) {
  Node n = make_node("Gemm", {"a", "b", "c"}, {"y"});
  auto a = Tensor::from_vector<float>({1, 2}, {1, 2});
  auto b = Tensor::from_vector<float>({2, 2}, {1, 0, 0, 1});
  auto c = Tensor::from_vector<float>({2}, {5, 6});
  EXPECT_THROW(run_node(n, {a, b, Tensor::scalar<float>(1)}, 6), Error);  // broadcast=0
  expect_values(run_node(n, {a, b, c}, 6)[0], {1, 2}, {6, 8});            // exactly M*N elements
  n.attributes["broadcast"] = Attribute::of_int(1);
  expect_values(run_node(n, {a, b, Tensor::scalar<float>(1)}, 6)[0], {1, 2}, {2, 3});
}

TEST(NnGemm, OnednnMatchesReference) {
  std::mt19937 rng(5);
  struct Case {
    int64_t m, k, n;
    bool ta, tb;
    float alpha, beta;
    Shape c;  // empty vector with has_c=false means no C
    bool has_c;
  };
  std::vector<Case> cases = {
      {3, 4, 5, false, false, 1, 1, {5}, true},
      {4, 3, 2, true, false, 1, 1, {4, 2}, true},
      {5, 6, 3, false, true, 0.5f, 2, {1, 3}, true},
      {2, 7, 4, true, true, 0.25f, 0.35f, {1, 4}, true},
      {6, 5, 4, false, false, 1, 0.5f, {6, 1}, true},
      {6, 5, 4, false, false, 1.5f, 1, {}, true},
      {6, 5, 4, false, true, 2, 1, {}, false},
      {64, 96, 80, true, false, 1, 1, {80}, true},
      {3, 4, 5, false, false, 1, 0, {3, 5}, true},
  };
  for (const Case& c : cases) {
    Node n = make_node("Gemm", {"a", "b", c.has_c ? "c" : ""}, {"y"});
    n.attributes["transA"] = Attribute::of_int(c.ta);
    n.attributes["transB"] = Attribute::of_int(c.tb);
    n.attributes["alpha"] = Attribute::of_float(c.alpha);
    n.attributes["beta"] = Attribute::of_float(c.beta);
    std::vector<Tensor> in = {random_tensor(c.ta ? Shape{c.k, c.m} : Shape{c.m, c.k}, rng),
                              random_tensor(c.tb ? Shape{c.n, c.k} : Shape{c.k, c.n}, rng)};
    if (c.has_c) in.push_back(random_tensor(c.c, rng));
    SCOPED_TRACE(std::to_string(c.m) + "x" + std::to_string(c.k) + "x" + std::to_string(c.n));
    expect_impls_agree(n, in);
  }
}

// ----------------------------------------------------------------------------- Pooling

TEST(NnPool, MaxPoolWithIndices) {
  Node n = make_node("MaxPool", {"x"}, {"y", "i"});
  n.attributes["kernel_shape"] = Attribute::of_ints({2, 2});
  n.attributes["strides"] = Attribute::of_ints({2, 2});
  auto x =
      Tensor::from_vector<float>({1, 1, 4, 4}, {1, 5, 2, 0, 3, 4, 8, 9, 0, 0, 1, 1, 7, 0, 1, 2});
  auto y = run_node(n, {x}, 12);
  expect_values(y[0], {1, 1, 2, 2}, {5, 9, 7, 2});
  expect_values(y[1], {1, 1, 2, 2}, {1, 7, 12, 15});
  n.attributes["storage_order"] = Attribute::of_int(1);
  expect_values(run_node(n, {x}, 12)[1], {1, 1, 2, 2}, {4, 13, 3, 15});
  // The oneDNN path declines nodes that want Indices.
  EXPECT_THROW(run_impl(n, {x}, 12, "onednn"), Error);
}

TEST(NnPool, MaxPoolCeilDilationsInt8) {
  Node n = make_node("MaxPool", {"x"}, {"y"});
  n.attributes["kernel_shape"] = Attribute::of_ints({2});
  n.attributes["strides"] = Attribute::of_ints({2});
  n.attributes["ceil_mode"] = Attribute::of_int(1);
  auto x = Tensor::from_vector<int8_t>({1, 1, 5}, {-1, -5, 3, 2, -7});
  expect_values(run_node(n, {x}, 12)[0], {1, 1, 3}, {-1, 3, -7});
  Node d = make_node("MaxPool", {"x"}, {"y"});
  d.attributes["kernel_shape"] = Attribute::of_ints({2});
  d.attributes["dilations"] = Attribute::of_ints({3});
  auto xf = Tensor::from_vector<float>({1, 1, 5}, {1, 9, 2, 4, 0});
  for (const char* impl : {"reference", "onednn"})
    expect_values(run_impl(d, {xf}, 12, impl)[0], {1, 1, 2}, {4, 9});
}

TEST(NnPool, AveragePoolPads) {
  Node n = make_node("AveragePool", {"x"}, {"y"});
  n.attributes["kernel_shape"] = Attribute::of_ints({3});
  n.attributes["pads"] = Attribute::of_ints({1, 1});
  auto x = Tensor::from_vector<float>({1, 1, 3}, {3, 6, 9});
  for (const char* impl : {"reference", "onednn"}) {
    expect_values(run_impl(n, {x}, 11, impl)[0], {1, 1, 3}, {4.5, 6, 7.5});
    Node inc = n;
    inc.attributes["count_include_pad"] = Attribute::of_int(1);
    expect_values(run_impl(inc, {x}, 11, impl)[0], {1, 1, 3}, {3, 6, 5});
  }
  Node bad = make_node("AveragePool", {"x"}, {"y"});
  EXPECT_THROW(run_node(bad, {x}, 11), Error);  // kernel_shape missing
  n.attributes["kernel_shape"] = Attribute::of_ints({3, 3});
  EXPECT_THROW(run_node(n, {x}, 11), Error);
}

TEST(NnPool, LpPoolAndGlobals) {
  auto x = Tensor::from_vector<float>({1, 2, 2, 2}, {1, -2, 3, 4, 0, 0, -6, 8});
  Node lp = make_node("LpPool", {"x"}, {"y"});
  lp.attributes["kernel_shape"] = Attribute::of_ints({2, 2});
  lp.attributes["p"] = Attribute::of_int(1);
  expect_values(run_node(lp, {x}, 11)[0], {1, 2, 1, 1}, {10, 14});
  Node lp1 = make_node("LpPool", {"x"}, {"y"});  // opset 1: p is a float, default 2
  lp1.attributes["kernel_shape"] = Attribute::of_ints({2, 2});
  expect_values(run_node(lp1, {x}, 1)[0], {1, 2, 1, 1}, {std::sqrt(30.0), 10}, 1e-4);
  expect_values(run_node(make_node("GlobalAveragePool", {"x"}, {"y"}), {x}, 1)[0], {1, 2, 1, 1},
                {1.5, 0.5});
  expect_values(run_node(make_node("GlobalMaxPool", {"x"}, {"y"}), {x}, 1)[0], {1, 2, 1, 1},
                {4, 8});
  Node glp = make_node("GlobalLpPool", {"x"}, {"y"});
  glp.attributes["p"] = Attribute::of_int(1);
  expect_values(run_node(glp, {x}, 2)[0], {1, 2, 1, 1}, {10, 14});
  EXPECT_THROW(run_node(make_node("GlobalMaxPool", {"x"}, {"y"}),
                        {Tensor::from_vector<float>({2, 2}, {1, 2, 3, 4})}, 1),
               Error);
}

TEST(NnPool, OnednnMatchesReference) {
  std::mt19937 rng(6);
  struct Case {
    std::string op;
    Shape x;
    std::vector<int64_t> kernel, strides, pads, dilations;
    bool ceil;
    bool include_pad;
    std::string auto_pad;
  };
  std::vector<Case> cases = {
      {"MaxPool", {2, 3, 11}, {3}, {2}, {1, 1}, {1}, false, false, ""},
      {"MaxPool", {1, 2, 9, 8}, {3, 2}, {2, 2}, {1, 0, 1, 1}, {1, 1}, true, false, ""},
      {"MaxPool", {1, 2, 9, 8}, {2, 2}, {1, 2}, {}, {2, 2}, false, false, "SAME_UPPER"},
      {"MaxPool",
       {1, 3, 6, 7, 5},
       {2, 3, 2},
       {2, 2, 1},
       {0, 1, 1, 0, 1, 0},
       {1, 1, 1},
       true,
       false,
       ""},
      {"AveragePool", {2, 3, 12}, {4}, {3}, {2, 1}, {1}, false, false, ""},
      {"AveragePool", {1, 2, 9, 9}, {3, 3}, {2, 2}, {1, 1, 1, 1}, {1, 1}, false, true, ""},
      {"AveragePool", {1, 2, 8, 9}, {3, 3}, {2, 2}, {1, 1, 1, 1}, {1, 1}, true, false, ""},
      {"AveragePool", {1, 2, 8, 9}, {3, 3}, {2, 2}, {1, 1, 1, 1}, {1, 1}, true, true, ""},
      {"AveragePool", {1, 2, 7, 7}, {2, 3}, {2, 2}, {}, {1, 1}, false, false, "SAME_LOWER"},
      {"AveragePool", {1, 2, 4, 6, 5}, {2, 2, 2}, {1, 2, 2}, {}, {1, 1, 1}, false, true, "VALID"},
  };
  for (const Case& c : cases) {
    Node n = make_node(c.op, {"x"}, {"y"});
    n.attributes["kernel_shape"] = Attribute::of_ints(c.kernel);
    n.attributes["strides"] = Attribute::of_ints(c.strides);
    if (!c.pads.empty()) n.attributes["pads"] = Attribute::of_ints(c.pads);
    if (c.op == "MaxPool") n.attributes["dilations"] = Attribute::of_ints(c.dilations);
    n.attributes["ceil_mode"] = Attribute::of_int(c.ceil);
    if (c.op == "AveragePool") n.attributes["count_include_pad"] = Attribute::of_int(c.include_pad);
    if (!c.auto_pad.empty()) n.attributes["auto_pad"] = Attribute::of_string(c.auto_pad);
    SCOPED_TRACE(c.op + " " + shape_to_string(c.x));
    expect_impls_agree(n, {random_tensor(c.x, rng)}, 12);
  }
}

// MaxPool with Indices on 2-D float32 windows: the direct kernel gives the reference's values
// and indices bitwise, ties (repeated values) going to the first element of the window.
TEST(NnPool, DirectMaxPoolWithIndicesMatchesReference) {
  std::mt19937 rng(7);
  struct Case {
    Shape x;
    std::vector<int64_t> kernel, strides, pads;
    bool ceil;
    std::string auto_pad;
  };
  std::vector<Case> cases = {
      {{2, 3, 12, 12}, {3, 3}, {2, 2}, {1, 1, 1, 1}, false, ""},  // ResNet's stem pool
      {{1, 2, 9, 8}, {3, 2}, {2, 2}, {1, 0, 1, 1}, true, ""},
      {{1, 2, 9, 8}, {2, 2}, {1, 2}, {}, false, "SAME_UPPER"},
      {{1, 1, 7, 7}, {2, 3}, {2, 2}, {}, false, "SAME_LOWER"},
      {{1, 2, 5, 6}, {2, 2}, {2, 2}, {}, false, "VALID"},
      {{3, 4, 6, 6}, {1, 1}, {1, 1}, {}, false, ""},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(shape_to_string(c.x));
    Node n = make_node("MaxPool", {"x"}, {"y", "i"});
    n.attributes["kernel_shape"] = Attribute::of_ints(c.kernel);
    n.attributes["strides"] = Attribute::of_ints(c.strides);
    if (!c.pads.empty()) n.attributes["pads"] = Attribute::of_ints(c.pads);
    n.attributes["ceil_mode"] = Attribute::of_int(c.ceil);
    if (!c.auto_pad.empty()) n.attributes["auto_pad"] = Attribute::of_string(c.auto_pad);
    // Values from a few levels, so windows hold ties.
    std::uniform_int_distribution<int> level(-3, 3);
    std::vector<float> v(static_cast<size_t>(shape_numel(c.x)));
    for (float& e : v) e = static_cast<float>(level(rng)) * 0.5f;
    Tensor x = Tensor::from_vector<float>(c.x, v);
    auto fast = run_impl(n, {x}, 12, "direct2d", 2);
    auto ref = run_impl(n, {x}, 12, "reference", 2);
    ASSERT_EQ(fast[0].shape(), ref[0].shape());
    ASSERT_EQ(fast[1].shape(), ref[1].shape());
    for (int64_t i = 0; i < ref[0].numel(); ++i) {
      ASSERT_EQ(fast[0].data<float>()[i], ref[0].data<float>()[i]) << "Y element " << i;
      ASSERT_EQ(fast[1].data<int64_t>()[i], ref[1].data<int64_t>()[i]) << "Indices element " << i;
    }
  }
  // Dilations and storage_order 1 are the reference kernel's.
  Node dilated = make_node("MaxPool", {"x"}, {"y", "i"});
  dilated.attributes["kernel_shape"] = Attribute::of_ints({2, 2});
  dilated.attributes["dilations"] = Attribute::of_ints({2, 2});
  Tensor x = random_tensor({1, 1, 5, 5}, rng);
  auto fast = run_impl(dilated, {x}, 12, "direct2d");
  auto ref = run_impl(dilated, {x}, 12, "reference");
  for (int64_t i = 0; i < ref[1].numel(); ++i)
    EXPECT_EQ(fast[1].data<int64_t>()[i], ref[1].data<int64_t>()[i]);
  Node column = dilated;
  column.attributes.erase("dilations");
  column.attributes["storage_order"] = Attribute::of_int(1);
  EXPECT_THROW(run_impl(column, {x}, 12, "direct2d"), Error);
}

// ------------------------------------------------------------------------------ MaxUnpool

TEST(NnMaxUnpool, ScattersAndOutputShape) {
  Tensor x = Tensor::from_vector<float>({1, 1, 1, 2}, {5, 7});
  Tensor i = Tensor::from_vector<int64_t>({1, 1, 1, 2}, {1, 2});
  Node n = make_node("MaxUnpool", {"x", "i"}, {"y"});
  n.attributes["kernel_shape"] = Attribute::of_ints({1, 2});
  n.attributes["strides"] = Attribute::of_ints({1, 2});
  expect_values(run_node(n, {x, i}, 11)[0], {1, 1, 1, 4}, {0, 5, 7, 0});
  Node s = make_node("MaxUnpool", {"x", "i", "s"}, {"y"});
  s.attributes["kernel_shape"] = Attribute::of_ints({1, 2});
  s.attributes["strides"] = Attribute::of_ints({1, 2});
  expect_values(run_node(s, {x, i, Tensor::from_vector<int64_t>({4}, {1, 1, 1, 5})}, 11)[0],
                {1, 1, 1, 5}, {0, 5, 7, 0, 0});  // same coordinates in the wider row
  EXPECT_THROW(run_node(n, {x, Tensor::from_vector<int64_t>({1, 1, 1, 2}, {1, 9})}, 11), Error);
}

// ----------------------------------------------------------------------- Resize/Upsample

TEST(NnResize, NearestScalesAndSizes) {
  auto x = Tensor::from_vector<float>({1, 1, 2, 2}, {1, 2, 3, 4});
  auto scales = Tensor::from_vector<float>({4}, {1, 1, 2, 1.5f});
  Node n = make_node("Resize", {"x", "", "scales"}, {"y"});
  n.attributes["mode"] = Attribute::of_string("nearest");
  n.attributes["coordinate_transformation_mode"] = Attribute::of_string("asymmetric");
  n.attributes["nearest_mode"] = Attribute::of_string("floor");
  // Width 3: x/1.5 = 0, 0.67, 1.33 -> 0, 0, 1.
  expect_values(run_node(n, {x, scales}, 13)[0], {1, 1, 4, 3},
                {1, 1, 2, 1, 1, 2, 3, 3, 4, 3, 3, 4});
  Node s = make_node("Resize", {"x", "", "", "sizes"}, {"y"});
  auto sizes = Tensor::from_vector<int64_t>({4}, {1, 1, 1, 4});
  // half_pixel, round_prefer_floor: rows (0.5)/0.5-0.5 = 0.5 -> 0; cols (j+.5)/2-.5 -> 0,0,1,1.
  expect_values(run_node(s, {x, sizes}, 13)[0], {1, 1, 1, 4}, {1, 1, 2, 2});
  EXPECT_THROW(run_node(s, {x, Tensor::from_vector<int64_t>({3}, {1, 1, 1})}, 13), Error);
  Node both = make_node("Resize", {"x", "", "scales", "sizes"}, {"y"});
  EXPECT_THROW(run_node(both, {x, scales, sizes}, 13), Error);
}

TEST(NnResize, LinearAndCubic) {
  auto x = Tensor::from_vector<float>({1, 1, 1, 2}, {0, 4});
  Node n = make_node("Resize", {"x", "", "", "sizes"}, {"y"});
  n.attributes["mode"] = Attribute::of_string("linear");
  n.attributes["coordinate_transformation_mode"] = Attribute::of_string("align_corners");
  auto sizes = Tensor::from_vector<int64_t>({4}, {1, 1, 1, 5});
  expect_values(run_node(n, {x, sizes}, 13)[0], {1, 1, 1, 5}, {0, 1, 2, 3, 4});
  n.attributes["coordinate_transformation_mode"] = Attribute::of_string("half_pixel");
  // (j + .5) * 2/5 - .5 = -0.3, 0.1, 0.5, 0.9, 1.3 -> clamped linear.
  expect_values(run_node(n, {x, sizes}, 13)[0], {1, 1, 1, 5}, {0, 0.4, 2, 3.6, 4}, 1e-5);
  // Cubic at integer coordinates reproduces the input.
  Node c = make_node("Resize", {"x", "", "scales"}, {"y"});
  c.attributes["mode"] = Attribute::of_string("cubic");
  c.attributes["coordinate_transformation_mode"] = Attribute::of_string("asymmetric");
  auto x4 = Tensor::from_vector<float>({4}, {1, 5, 2, 8});
  auto y = run_node(c, {x4, Tensor::from_vector<float>({1}, {2})}, 11)[0];
  ASSERT_EQ(y.shape(), (Shape{8}));
  for (int i = 0; i < 4; ++i) EXPECT_NEAR(y.item_as_double(2 * i), x4.item_as_double(i), 1e-6);
  // Midpoint between 5 and 2 with A = -0.75: weights (-0.09375, 0.59375, 0.59375, -0.09375).
  EXPECT_NEAR(y.item_as_double(3), -0.09375 * 1 + 0.59375 * 5 + 0.59375 * 2 - 0.09375 * 8, 1e-5);
}

TEST(NnResize, TfCropAndResizeAxesAndAspect) {
  auto x = Tensor::from_vector<float>({1, 3}, {0, 10, 20});
  Node n = make_node("Resize", {"x", "roi", "", "sizes"}, {"y"});
  n.attributes["mode"] = Attribute::of_string("linear");
  n.attributes["coordinate_transformation_mode"] = Attribute::of_string("tf_crop_and_resize");
  n.attributes["extrapolation_value"] = Attribute::of_float(-1);
  n.attributes["axes"] = Attribute::of_ints({-1});
  auto roi = Tensor::from_vector<float>({2}, {0.25f, 1.25f});
  // Crop [0.5, 2.5] in input coordinates, 3 samples: 0.5, 1.5, 2.5 (outside).
  expect_values(run_node(n, {x, roi, Tensor::from_vector<int64_t>({1}, {3})}, 18)[0], {1, 3},
                {5, 15, -1});
  // With scales the output covers the cropped extent: floor(4 * 0.5 * 1) = 2 samples over
  // input coordinates [0, 1.5].
  Node sc = make_node("Resize", {"x", "roi", "scales"}, {"y"});
  sc.attributes = n.attributes;
  sc.attributes.erase("axes");
  auto x4 = Tensor::from_vector<float>({1, 4}, {0, 10, 20, 30});
  auto roi4 = Tensor::from_vector<float>({4}, {0, 0, 1, 0.5f});
  expect_values(run_node(sc, {x4, roi4, Tensor::from_vector<float>({2}, {1, 1})}, 13)[0], {1, 2},
                {0, 15});
  Node k = make_node("Resize", {"x", "", "", "sizes"}, {"y"});
  k.attributes["keep_aspect_ratio_policy"] = Attribute::of_string("not_larger");
  auto img = Tensor::from_vector<float>({2, 4}, iota_values(8));
  auto sizes = Tensor::from_vector<int64_t>({2}, {4, 4});
  // Ratios 2 and 1: not_larger keeps scale 1 (a copy), not_smaller uses 2 on both axes.
  auto y = run_node(k, {img, sizes}, 18)[0];
  expect_values(y, {2, 4}, {0, 1, 2, 3, 4, 5, 6, 7});
  k.attributes["keep_aspect_ratio_policy"] = Attribute::of_string("not_smaller");
  k.attributes["coordinate_transformation_mode"] = Attribute::of_string("asymmetric");
  k.attributes["nearest_mode"] = Attribute::of_string("floor");
  y = run_node(k, {img, sizes}, 18)[0];
  ASSERT_EQ(y.shape(), (Shape{4, 8}));
  EXPECT_EQ(y.item_as_double(3 * 8 + 5), 6);  // row 3 -> 1, col 5 -> 2
  k.attributes["keep_aspect_ratio_policy"] = Attribute::of_string("sideways");
  EXPECT_THROW(run_node(k, {img, sizes}, 18), Error);
}

TEST(NnResize, AntialiasLinearDownsample) {
  // Scale 0.5 stretches the triangle filter to 4 taps: weights (1, 3, 3, 1) / 8, edge-clamped.
  Node n = make_node("Resize", {"x", "", "scales"}, {"y"});
  n.attributes["mode"] = Attribute::of_string("linear");
  n.attributes["antialias"] = Attribute::of_int(1);
  auto x = Tensor::from_vector<float>({4}, {0, 1, 2, 3});
  auto scales = Tensor::from_vector<float>({1}, {0.5f});
  expect_values(run_node(n, {x, scales}, 18)[0], {2}, {0.625, 2.375});
  // Without antialias the same resize samples linearly at 0.5 and 2.5.
  n.attributes["antialias"] = Attribute::of_int(0);
  expect_values(run_node(n, {x, scales}, 18)[0], {2}, {0.5, 2.5});
}

TEST(NnResize, Upsample) {
  auto x = Tensor::from_vector<float>({1, 1, 2, 2}, {1, 2, 3, 4});
  Node u9 = make_node("Upsample", {"x", "scales"}, {"y"});
  auto scales = Tensor::from_vector<float>({4}, {1, 1, 2, 2});
  std::vector<double> nearest = {1, 1, 2, 2, 1, 1, 2, 2, 3, 3, 4, 4, 3, 3, 4, 4};
  expect_values(run_node(u9, {x, scales}, 9)[0], {1, 1, 4, 4}, nearest);
  Node u7 = make_node("Upsample", {"x"}, {"y"});
  Attribute fs;
  fs.kind = Attribute::Kind::Floats;
  fs.floats = {1, 1, 2, 2};
  u7.attributes["scales"] = fs;
  expect_values(run_node(u7, {x}, 7)[0], {1, 1, 4, 4}, nearest);
  u7.attributes["mode"] = Attribute::of_string("linear");
  // Asymmetric linear: rows 0, .5, 1, 1.5 (clamped).
  expect_values(run_node(u7, {x}, 7)[0], {1, 1, 4, 4},
                {1, 1.5, 2, 2, 2, 2.5, 3, 3, 3, 3.5, 4, 4, 3, 3.5, 4, 4});
  Node r10 = make_node("Resize", {"x", "scales"}, {"y"});
  expect_values(run_node(r10, {x, scales}, 10)[0], {1, 1, 4, 4}, nearest);
  Node bad = make_node("Upsample", {"x", "scales"}, {"y"});
  bad.attributes["mode"] = Attribute::of_string("cubic");
  EXPECT_THROW(run_node(bad, {x, scales}, 9), Error);
}

// ----------------------------------------------------------------------------- GridSample

TEST(NnGridSample, IdentityGridAndPadding) {
  Tensor x = Tensor::from_vector<float>({1, 1, 2, 2}, {1, 2, 3, 4});
  // align_corners=1: normalized -1/1 hit pixel centres exactly.
  Tensor grid = Tensor::from_vector<float>({1, 1, 3, 2}, {-1, -1, 1, 1, 0, 0});
  Node n = make_node("GridSample", {"x", "g"}, {"y"});
  n.attributes["align_corners"] = Attribute::of_int(1);
  expect_values(run_node(n, {x, grid}, 16)[0], {1, 1, 1, 3}, {1, 4, 2.5});
  // Zero padding outside the image at align_corners=0: (x, y) = (-1, -1) is the corner of
  // pixel (0, 0), a quarter of whose bilinear weight is inside.
  Node z = make_node("GridSample", {"x", "g"}, {"y"});
  expect_values(run_node(z, {x, Tensor::from_vector<float>({1, 1, 1, 2}, {-1, -1})}, 16)[0],
                {1, 1, 1, 1}, {0.25});
  z.attributes["padding_mode"] = Attribute::of_string("border");
  expect_values(run_node(z, {x, Tensor::from_vector<float>({1, 1, 1, 2}, {-3, 3})}, 16)[0],
                {1, 1, 1, 1}, {3});
  z.attributes["mode"] = Attribute::of_string("nearest");
  z.attributes["padding_mode"] = Attribute::of_string("zeros");
  expect_values(run_node(z, {x, Tensor::from_vector<float>({1, 1, 1, 2}, {0.6f, -0.6f})}, 16)[0],
                {1, 1, 1, 1}, {2});
  EXPECT_THROW(run_node(z, {x, Tensor::from_vector<float>({1, 1, 1, 3}, {0, 0, 0})}, 16), Error);
}

}  // namespace
}  // namespace dprun

namespace dprun {
namespace {

// One oneDNN kernel object computed from several threads at once, with two input shapes,
// must match the reference: the primitive cache is shared and guarded.
TEST(NnConcurrency, SharedOnednnKernel) {
  Node n = testing::make_node("Conv", {"x", "w", "b"}, {"y"});
  n.attributes["pads"] = Attribute::of_ints({1, 1, 1, 1});
  KernelInfo info{n, 11, DeviceType::CPU, {}, {}};
  auto fast = KernelRegistry::instance().create(info, nullptr, "onednn");
  ASSERT_NE(fast, nullptr);
  std::mt19937 rng(7);
  std::vector<std::vector<Tensor>> inputs;
  std::vector<Tensor> expected;
  for (int64_t batch : {1, 2}) {
    inputs.push_back({random_tensor({batch, 3, 6, 5}, rng), random_tensor({4, 3, 3, 3}, rng),
                      random_tensor({4}, rng)});
    expected.push_back(testing::run_impl(n, inputs.back(), 11, "reference")[0]);
  }
  std::atomic<int> mismatches{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      std::unique_ptr<ExecutionContext> execution = testing::cpu_execution(1);
      for (int r = 0; r < 20; ++r) {
        const auto& in = inputs[static_cast<size_t>((t + r) % 2)];
        const Tensor& want = expected[static_cast<size_t>((t + r) % 2)];
        std::vector<const Tensor*> ptrs = {&in[0], &in[1], &in[2]};
        std::vector<Tensor> outs(1);
        KernelContext ctx(n, *execution, ptrs, outs);
        fast->compute(ctx);
        for (int64_t i = 0; i < want.numel(); ++i)
          if (std::abs(outs[0].item_as_double(i) - want.item_as_double(i)) > 1e-4) {
            ++mismatches;
            break;
          }
      }
    });
  for (auto& th : threads) th.join();
  EXPECT_EQ(mismatches.load(), 0);
}

}  // namespace
}  // namespace dprun
