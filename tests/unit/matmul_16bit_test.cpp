// MatMul and Gemm in float16 and bfloat16 on every device, and the fused MatMulBias and FusedGemm:
// the float32 product of the operands, rounded once to the operands' type. Values are multiples of
// 1/8 below 2, so every product and sum is exact in float32 and any summation order gives the same
// bits.
#include <gtest/gtest.h>

#include <map>
#include <optional>
#include <random>

#include "accelerator_test_util.h"
#include "engine/half.h"
#include "engine/model.h"
#include "graph_test_util.h"
#include "half_test_util.h"

namespace dprun {
namespace {

using testing::eighths;
using testing::rounded_16bit;
using testing::typed;

/// y = MatMul(a, b) with b fed, or an initializer when `constant_b`.
std::shared_ptr<Graph> matmul_graph(DType dtype, const Shape& a, const Shape& b, bool constant_b,
                                    const Tensor& b_value) {
  auto g = std::make_shared<Graph>();
  g->opset_imports[""] = 17;
  g->inputs = {{"a", typed(dtype, a)}};
  if (constant_b)
    g->initializers["b"] = b_value;
  else
    g->inputs.push_back({"b", typed(dtype, b)});
  g->nodes.push_back(testing::make_node("MatMul", {"a", "b"}, {"y"}));
  g->outputs = {{"y", {dtype, std::nullopt}}};
  return g;
}

struct Case {
  Shape a, b;
  bool constant_b;
};

class MatMul16Bit : public ::testing::TestWithParam<std::tuple<DType, DeviceType>> {};

TEST_P(MatMul16Bit, IsTheFloat32ProductRoundedOnce) {
  const auto [dtype, device_type] = GetParam();
  const std::string why = testing::accelerator_unusable_reason(device_type);
  if (!why.empty())
    GTEST_SKIP() << "needs a " << device_type_name(device_type) << " device: " << why;
  const std::vector<Case> cases = {{{3, 5}, {5, 4}, true},        {{2, 3, 5}, {5, 4}, true},
                                   {{2, 3, 5}, {2, 5, 4}, false}, {{2, 1, 3, 5}, {3, 5, 2}, false},
                                   {{5}, {5, 4}, false},          {{40, 70}, {70, 33}, true}};
  unsigned seed = 1;
  for (const Case& c : cases) {
    auto [a32, a16] = eighths(dtype, c.a, seed++);
    auto [b32, b16] = eighths(dtype, c.b, seed++);
    Model wide(matmul_graph(DType::Float32, c.a, c.b, c.constant_b, b32), Device::cpu());
    Model narrow(matmul_graph(dtype, c.a, c.b, c.constant_b, b16), Device{device_type, 0});
    ASSERT_EQ(narrow.plan()->graph().nodes.size(), 1u) << "MatMul ran between Casts";
    std::vector<Tensor> wide_in = {a32}, narrow_in = {a16.to(Device{device_type, 0})};
    if (!c.constant_b) {
      wide_in.push_back(b32);
      narrow_in.push_back(b16.to(Device{device_type, 0}));
    }
    const Tensor want = wide.run(wide_in)[0];
    const Tensor got = narrow.run(narrow_in)[0].to(Device::cpu());
    ASSERT_EQ(got.dtype(), dtype);
    ASSERT_EQ(got.shape(), want.shape()) << shape_to_string(c.a) << " x " << shape_to_string(c.b);
    for (int64_t i = 0; i < want.numel(); ++i) {
      const float v = want.data<float>()[i];
      const double rounded = rounded_16bit(v, dtype);
      ASSERT_EQ(got.item_as_double(i), rounded)
          << shape_to_string(c.a) << " x " << shape_to_string(c.b) << " element " << i;
    }
  }
}

/// Y = Gemm(A, B, C) with its attributes; B and C initializers.
std::shared_ptr<Graph> gemm_graph(DType dtype, const Shape& a, const Tensor& b, const Tensor* c,
                                  const std::map<std::string, Attribute>& attributes) {
  auto g = std::make_shared<Graph>();
  g->opset_imports[""] = 17;
  g->inputs = {{"a", typed(dtype, a)}};
  g->initializers["b"] = b;
  std::vector<std::string> inputs = {"a", "b"};
  if (c) {
    g->initializers["c"] = *c;
    inputs.push_back("c");
  }
  g->nodes.push_back(testing::make_node("Gemm", inputs, {"y"}));
  g->nodes.back().attributes = attributes;
  g->outputs = {{"y", {dtype, std::nullopt}}};
  return g;
}

struct GemmCase {
  Shape a, b;
  std::optional<Shape> c;
  std::map<std::string, Attribute> attributes;
};

TEST_P(MatMul16Bit, GemmIsTheFloat32ProductRoundedOnce) {
  const auto [dtype, device_type] = GetParam();
  const std::string why = testing::accelerator_unusable_reason(device_type);
  if (!why.empty())
    GTEST_SKIP() << "needs a " << device_type_name(device_type) << " device: " << why;
  const Attribute one = Attribute::of_int(1);
  const std::vector<GemmCase> cases = {
      {{3, 5}, {5, 4}, std::nullopt, {}},
      {{3, 5}, {5, 4}, Shape{4}, {}},  // a linear layer's bias: oneDNN's bias
      {{5, 3}, {4, 5}, Shape{3, 4}, {{"transA", one}, {"transB", one}}},
      {{3, 5},
       {5, 4},
       Shape{3, 1},
       {{"alpha", Attribute::of_float(0.5f)}, {"beta", Attribute::of_float(2.f)}}},
      {{33, 70}, {70, 40}, Shape{40}, {}}};
  unsigned seed = 100;
  for (const GemmCase& c : cases) {
    auto [a32, a16] = eighths(dtype, c.a, seed++);
    auto [b32, b16] = eighths(dtype, c.b, seed++);
    std::optional<testing::Eighths> bias;
    if (c.c) bias = eighths(dtype, *c.c, seed++);
    Model wide(gemm_graph(DType::Float32, c.a, b32, bias ? &bias->wide : nullptr, c.attributes),
               Device::cpu());
    Model narrow(gemm_graph(dtype, c.a, b16, bias ? &bias->narrow : nullptr, c.attributes),
                 Device{device_type, 0});
    ASSERT_EQ(narrow.plan()->graph().nodes.size(), 1u) << "Gemm ran between Casts";
    const Tensor want = wide.run(std::vector<Tensor>{a32})[0];
    const Tensor got =
        narrow.run(std::vector<Tensor>{a16.to(Device{device_type, 0})})[0].to(Device::cpu());
    ASSERT_EQ(got.dtype(), dtype);
    ASSERT_EQ(got.shape(), want.shape());
    for (int64_t i = 0; i < want.numel(); ++i) {
      const float v = want.data<float>()[i];
      const double rounded = rounded_16bit(v, dtype);
      ASSERT_EQ(got.item_as_double(i), rounded)
          << shape_to_string(c.a) << " x " << shape_to_string(c.b) << " with "
          << c.attributes.size() << " attribute(s), element " << i;
    }
  }
}

// MatMul then Add of a constant bias (then a Relu), and Gemm then Relu, in 16 bits on every
// device: the op fusion makes one MatMulBias or FusedGemm of them (oneDNN's 16-bit product on
// the CPU, cuBLASLt's with its bias and Relu epilogue on a GPU), for A of 2 and 3 dims; the result
// is the float32 product plus bias, then the Relu, rounded once.
TEST_P(MatMul16Bit, FusedProductsRoundOnce) {
  const auto [dtype, device_type] = GetParam();
  const std::string why = testing::accelerator_unusable_reason(device_type);
  if (!why.empty())
    GTEST_SKIP() << "needs a " << device_type_name(device_type) << " device: " << why;
  struct FusedCase {
    const char* first;  // MatMul or Gemm
    Shape a;
    bool relu;
    const char* fused_op;
  };
  const std::vector<FusedCase> cases = {{"MatMul", {6, 5}, false, "MatMulBias"},
                                        {"MatMul", {2, 3, 5}, false, "MatMulBias"},
                                        {"MatMul", {2, 3, 5}, true, "MatMulBias"},
                                        {"Gemm", {6, 5}, true, "FusedGemm"}};
  unsigned seed = 7;
  for (const FusedCase& c : cases) {
    SCOPED_TRACE(std::string(c.first) + " A " + shape_to_string(c.a) + (c.relu ? " Relu" : ""));
    auto [a32, a16] = eighths(dtype, c.a, seed++);
    auto [b32, b16] = eighths(dtype, {5, 4}, seed++);
    auto [c32, c16] = eighths(dtype, {4}, seed++);
    auto graph = [&](DType t, const Tensor& b, const Tensor& bias) {
      auto g = std::make_shared<Graph>();
      g->opset_imports[""] = 17;
      g->inputs = {{"a", typed(t, c.a)}};
      g->initializers["b"] = b;
      g->initializers["c"] = bias;
      Shape out = c.a;
      out.back() = 4;
      if (std::string(c.first) == "Gemm") {
        g->nodes = {testing::make_node("Gemm", {"a", "b", "c"}, {"p"})};
      } else {
        g->nodes = {testing::make_node("MatMul", {"a", "b"}, {"m"}),
                    testing::make_node("Add", {"m", "c"}, {"p"})};
        g->value_types["m"] = typed(t, out);
      }
      if (c.relu) {
        g->nodes.push_back(testing::make_node("Relu", {"p"}, {"y"}));
        g->value_types["p"] = typed(t, out);
      } else {
        g->nodes.back().outputs = {"y"};
      }
      g->outputs = {{"y", typed(t, out)}};
      return g;
    };
    const Device device{device_type, 0};
    Model wide(graph(DType::Float32, b32, c32), Device::cpu());
    Model narrow(graph(dtype, b16, c16), device);
    ASSERT_EQ(narrow.plan()->graph().nodes.size(), 1u);
    EXPECT_EQ(narrow.plan()->graph().nodes[0].op_type, c.fused_op);
    const Tensor want = wide.run(std::vector<Tensor>{a32})[0];
    const Tensor got = narrow.run(std::vector<Tensor>{a16.to(device)})[0].to(Device::cpu());
    ASSERT_EQ(got.dtype(), dtype);
    ASSERT_EQ(got.shape(), want.shape());
    for (int64_t i = 0; i < want.numel(); ++i)
      ASSERT_EQ(got.item_as_double(i), rounded_16bit(want.data<float>()[i], dtype)) << i;
  }
}

INSTANTIATE_TEST_SUITE_P(Devices, MatMul16Bit, testing::half_on_devices(),
                         testing::half_on_device_name);

}  // namespace
}  // namespace dprun
