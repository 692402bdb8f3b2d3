// Quantization kernels (ops/quantize/quantize.cpp): QuantizeLinear / DequantizeLinear per tensor
// and per axis (round half to even, saturation), DynamicQuantizeLinear, QLinearMatMul and a
// pointwise QLinearConv, against values worked out by hand from the ONNX formulas.
#include <gtest/gtest.h>

#include "engine/error.h"
#include "op_test_util.h"

namespace dprun {
namespace {

using testing::expect_values;
using testing::make_node;
using testing::run_node;

TEST(QuantizeKernels, QuantizeDequantizePerTensorAndAxis) {
  Tensor x = Tensor::from_vector<float>({4}, {0.f, 2.5f, 3.5f, -1000.f});
  Node q = make_node("QuantizeLinear", {"x", "s", "z"}, {"y"});
  // Round half to even: 2.5/1 -> 2, 3.5 -> 4; saturation at 0.
  auto y = run_node(q, {x, Tensor::scalar<float>(1.f), Tensor::scalar<uint8_t>(10)}, 13)[0];
  EXPECT_EQ(y.dtype(), DType::UInt8);
  expect_values(y, {4}, {10, 12, 14, 0});
  auto y8 = run_node(q, {x, Tensor::scalar<float>(0.5f), Tensor::scalar<int8_t>(-1)}, 13)[0];
  EXPECT_EQ(y8.dtype(), DType::Int8);
  expect_values(y8, {4}, {-1, 4, 6, -128});
  // Per-axis along axis 1 of [2, 2].
  Tensor x2 = Tensor::from_vector<float>({2, 2}, {1.f, 2.f, 3.f, 4.f});
  auto ya = run_node(q,
                     {x2, Tensor::from_vector<float>({2}, {1.f, 2.f}),
                      Tensor::from_vector<uint8_t>({2}, {0, 100})},
                     13)[0];
  expect_values(ya, {2, 2}, {1, 101, 3, 102});
  Node dq = make_node("DequantizeLinear", {"x", "s", "z"}, {"y"});
  auto back = run_node(dq,
                       {ya, Tensor::from_vector<float>({2}, {1.f, 2.f}),
                        Tensor::from_vector<uint8_t>({2}, {0, 100})},
                       13)[0];
  expect_values(back, {2, 2}, {1, 2, 3, 4});
  // Mismatched per-axis length fails.
  EXPECT_THROW(run_node(q,
                        {x2, Tensor::from_vector<float>({3}, {1, 1, 1}),
                         Tensor::from_vector<uint8_t>({3}, {0, 0, 0})},
                        13),
               Error);
}

TEST(QuantizeKernels, DynamicQuantizeLinear) {
  Tensor x = Tensor::from_vector<float>({3}, {-1.f, 0.f, 2.f});
  auto out = run_node(make_node("DynamicQuantizeLinear", {"x"}, {"y", "s", "z"}), {x}, 11);
  const float scale = 3.f / 255.f;
  expect_values(out[1], {}, {scale}, 1e-7);
  expect_values(out[2], {}, {85});  // round(1 / scale) = 85
  expect_values(out[0], {3}, {0, 85, 255});
}

TEST(QuantizeKernels, QLinearMatMulMatchesFloatReference) {
  Tensor a = Tensor::from_vector<uint8_t>({2, 2}, {10, 20, 30, 40});
  Tensor b = Tensor::from_vector<uint8_t>({2, 1}, {5, 7});
  Node n = make_node("QLinearMatMul", {"a", "as", "az", "b", "bs", "bz", "ys", "yz"}, {"y"});
  auto y = run_node(
      n,
      {a, Tensor::scalar<float>(0.1f), Tensor::scalar<uint8_t>(10), b, Tensor::scalar<float>(0.2f),
       Tensor::scalar<uint8_t>(5), Tensor::scalar<float>(0.05f), Tensor::scalar<uint8_t>(3)},
      10)[0];
  // (a - 10) @ (b - 5) = [[0*0 + 10*2], [20*0 + 30*2]] = [20, 60]; * 0.1*0.2/0.05 = 0.4.
  expect_values(y, {2, 1}, {3 + 8, 3 + 24});
}

TEST(QuantizeKernels, QLinearConvPointwise) {
  Tensor x = Tensor::from_vector<uint8_t>({1, 1, 2, 2}, {0, 10, 20, 30});
  Tensor w = Tensor::from_vector<int8_t>({2, 1, 1, 1}, {2, -1});
  Node n = make_node("QLinearConv", {"x", "xs", "xz", "w", "ws", "wz", "ys", "yz", "B"}, {"y"});
  auto y = run_node(n,
                    {x, Tensor::scalar<float>(1.f), Tensor::scalar<uint8_t>(0), w,
                     Tensor::from_vector<float>({2}, {1.f, 1.f}),
                     Tensor::from_vector<int8_t>({2}, {0, 0}), Tensor::scalar<float>(2.f),
                     Tensor::scalar<uint8_t>(100), Tensor::from_vector<int32_t>({2}, {4, 0})},
                    10)[0];
  // Channel 0: (2x + 4) / 2 + 100; channel 1: -x / 2 + 100 (half to even).
  expect_values(y, {1, 2, 2, 2}, {102, 112, 122, 132, 100, 95, 90, 85});
}

}  // namespace
}  // namespace dprun
