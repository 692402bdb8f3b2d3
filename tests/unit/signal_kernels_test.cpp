// Signal-processing kernels (ops/signal/window.cpp, ops/signal/dft.cpp): Hann, Hamming and Blackman
// windows, DFT (forward, inverse, onesided, dft_length, opset 20's axis input), STFT frame by
// frame and the MelWeightMatrix's triangles, against hand-computed transforms and window values.
#include <gtest/gtest.h>

#include <algorithm>

#include "engine/error.h"
#include "op_test_util.h"

namespace dprun {
namespace {

using testing::expect_values;
using testing::make_node;
using testing::run_node;

TEST(SignalKernels, HannHammingBlackman) {
  Node h = make_node("HannWindow", {"n"}, {"y"});
  expect_values(run_node(h, {Tensor::scalar<int64_t>(4)}, 17)[0], {4}, {0, 0.5, 1, 0.5});
  h.attributes["periodic"] = Attribute::of_int(0);
  expect_values(run_node(h, {Tensor::scalar<int64_t>(4)}, 17)[0], {4}, {0, 0.75, 0.75, 0});
  const double a0 = 25.0 / 46.0;
  expect_values(
      run_node(make_node("HammingWindow", {"n"}, {"y"}), {Tensor::scalar<int32_t>(2)}, 17)[0], {2},
      {a0 - (1 - a0), a0 + (1 - a0)});
  Node b = make_node("BlackmanWindow", {"n"}, {"y"});
  b.attributes["output_datatype"] = Attribute::of_int(11);
  auto bw = run_node(b, {Tensor::scalar<int64_t>(4)}, 17)[0];
  EXPECT_EQ(bw.dtype(), DType::Float64);
  expect_values(bw, {4}, {0.42 - 0.5 + 0.08, 0.42 - 0.08, 0.42 + 0.5 + 0.08, 0.42 - 0.08}, 1e-12);
  EXPECT_THROW(run_node(h, {Tensor::scalar<int64_t>(-1)}, 17), Error);
}

TEST(SignalKernels, ForwardInverseOnesided) {
  Tensor x = Tensor::from_vector<float>({1, 4, 1}, {1, 2, 3, 4});
  Node n = make_node("DFT", {"x"}, {"y"});
  auto y = run_node(n, {x}, 17)[0];
  expect_values(y, {1, 4, 2}, {10, 0, -2, 2, -2, 0, -2, -2}, 1e-5);
  Node inv = make_node("DFT", {"x"}, {"y"});
  inv.attributes["inverse"] = Attribute::of_int(1);
  expect_values(run_node(inv, {y}, 17)[0], {1, 4, 2}, {1, 0, 2, 0, 3, 0, 4, 0}, 1e-5);
  Node one = make_node("DFT", {"x", "len"}, {"y"});
  one.attributes["onesided"] = Attribute::of_int(1);
  // dft_length 2 truncates to [1, 2]: X = [3, -1].
  expect_values(run_node(one, {x, Tensor::scalar<int64_t>(2)}, 17)[0], {1, 2, 2}, {3, 0, -1, 0},
                1e-5);
  // Opset 20 takes the axis as an input.
  Node n20 = make_node("DFT", {"x", "", "axis"}, {"y"});
  expect_values(run_node(n20, {x, Tensor::scalar<int64_t>(1)}, 20)[0], {1, 4, 2},
                {10, 0, -2, 2, -2, 0, -2, -2}, 1e-5);
  Node bad = make_node("DFT", {"x"}, {"y"});
  bad.attributes["axis"] = Attribute::of_int(2);
  EXPECT_THROW(run_node(bad, {x}, 17), Error);
}

TEST(SignalKernels, StftMatchesFramewiseDft) {
  std::vector<float> sig = {1, 2, 3, 4, 0, 1, 0, -1};
  Node n = make_node("STFT", {"s", "step", "w"}, {"y"});
  n.attributes["onesided"] = Attribute::of_int(0);
  auto y = run_node(n,
                    {Tensor::from_vector<float>({1, 8, 1}, sig), Tensor::scalar<int64_t>(4),
                     Tensor::from_vector<float>({4}, {1, 1, 1, 1})},
                    17)[0];
  // Frame 0 = [1,2,3,4]; frame 1 = [0,1,0,-1] -> [0, -2i, 0, 2i].
  expect_values(y, {1, 2, 4, 2}, {10, 0, -2, 2, -2, 0, -2, -2, 0, 0, 0, -2, 0, 0, 0, 2}, 1e-5);
  Node w = make_node("STFT", {"s", "step", "", "len"}, {"y"});
  auto half = run_node(w,
                       {Tensor::from_vector<float>({1, 8, 1}, sig), Tensor::scalar<int64_t>(2),
                        Tensor::scalar<int64_t>(4)},
                       17)[0];
  EXPECT_EQ(shape_to_string(half.shape()), shape_to_string(Shape{1, 3, 3, 2}));
  EXPECT_THROW(run_node(w,
                        {Tensor::from_vector<float>({1, 8, 1}, sig), Tensor::scalar<int64_t>(2),
                         Tensor::scalar<int64_t>(9)},
                        17),
               Error);
}

TEST(SignalKernels, MelWeightMatrixTriangles) {
  Node n = make_node("MelWeightMatrix", {"m", "d", "r", "lo", "hi"}, {"y"});
  auto y = run_node(
      n,
      {Tensor::scalar<int64_t>(4), Tensor::scalar<int64_t>(32), Tensor::scalar<int64_t>(16000),
       Tensor::scalar<float>(0.f), Tensor::scalar<float>(8000.f)},
      17)[0];
  ASSERT_EQ(shape_to_string(y.shape()), shape_to_string(Shape{17, 4}));
  for (int64_t m = 0; m < 4; ++m) {
    double peak = 0;
    for (int64_t k = 0; k < 17; ++k) {
      const double v = y.item_as_double(k * 4 + m);
      EXPECT_GE(v, 0);
      EXPECT_LE(v, 1);
      peak = std::max(peak, v);
    }
    EXPECT_DOUBLE_EQ(peak, 1.0) << "filter " << m;
  }
}

}  // namespace
}  // namespace dprun
