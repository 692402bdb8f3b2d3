// Conv, ConvTranspose, MaxPool, AveragePool and the global poolings in float16 and bfloat16 on
// every device: the float32 result of the same values, rounded once to the operands' type. Values
// are multiples of 1/8 below 2 and averaging windows hold 4 values (2 or 1 where partial), so every
// product, sum and mean is exact in float32 and any summation order gives the same bits. Each node
// runs as it is (a 16-bit kernel, no Casts around it). On the CPU, oneDNN's 16-bit primitives run
// where the CPU has them, else the kernels' float32 paths over widened copies. cuDNN adds a Conv's
// bias to the rounded product, so there a result with a bias may be one 16-bit step from the single
// rounding.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <optional>
#include <string>
#include <vector>

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

using Attributes = std::map<std::string, Attribute>;

/// One node of `op` reading the fed input "x" and the initializers `constants` (in order),
/// writing "y" and, when `indices`, "i".
std::shared_ptr<Graph> one_node_graph(const std::string& op, DType dtype, const Shape& x,
                                      const std::vector<std::pair<std::string, Tensor>>& constants,
                                      const Attributes& attributes, bool indices = false) {
  auto g = std::make_shared<Graph>();
  g->opset_imports[""] = 17;
  g->inputs = {{"x", typed(dtype, x)}};
  std::vector<std::string> inputs = {"x"};
  for (const auto& [name, value] : constants) {
    g->initializers[name] = value;
    inputs.push_back(name);
  }
  std::vector<std::string> outputs = {"y"};
  if (indices) outputs.push_back("i");
  g->nodes.push_back(testing::make_node(op, inputs, outputs));
  g->nodes.back().attributes = attributes;
  g->outputs = {{"y", {dtype, std::nullopt}}};
  if (indices) g->outputs.push_back({"i", {DType::Int64, std::nullopt}});
  return g;
}

struct Case {
  std::string op;
  Shape x;
  std::optional<Shape> w, b;  // Conv's weights and bias
  Attributes attributes;
  bool indices = false;  // MaxPool's second output
  std::string label;
};

std::vector<Case> cases() {
  const auto ints = Attribute::of_ints;
  const Attribute one = Attribute::of_int(1);
  return {
      {"Conv", {2, 3, 6, 5}, Shape{4, 3, 3, 3}, Shape{4}, {}, false, "3x3 with bias"},
      {"Conv",
       {1, 4, 7, 7},
       Shape{6, 2, 3, 3},
       std::nullopt,
       {{"group", Attribute::of_int(2)}, {"pads", ints({1, 1, 1, 1})}, {"strides", ints({2, 2})}},
       false,
       "grouped, padded, strided, no bias"},
      {"Conv",
       {2, 8, 5, 5},
       Shape{8, 1, 3, 3},
       Shape{8},
       {{"group", Attribute::of_int(8)}, {"pads", ints({1, 1, 1, 1})}},
       false,
       "depthwise"},
      {"Conv",
       {2, 3, 9},
       Shape{5, 3, 2},
       Shape{5},
       {{"dilations", ints({2})}},
       false,
       "1-D dilated"},
      {"Conv", {1, 16, 6, 6}, Shape{16, 16, 1, 1}, std::nullopt, {}, false, "1x1"},
      {"ConvTranspose",
       {1, 3, 4, 4},
       Shape{3, 2, 3, 3},
       Shape{2},
       {{"strides", ints({2, 2})}},
       false,
       "3x3 stride 2 with bias"},
      {"MaxPool",
       {2, 3, 7, 6},
       std::nullopt,
       std::nullopt,
       {{"kernel_shape", ints({3, 3})}, {"strides", ints({2, 2})}, {"ceil_mode", one}},
       false,
       "3x3 stride 2 ceil"},
      {"MaxPool",
       {1, 2, 5, 5},
       std::nullopt,
       std::nullopt,
       {{"kernel_shape", ints({2, 2})}},
       true,
       "with Indices"},
      {"AveragePool",
       {2, 3, 6, 8},
       std::nullopt,
       std::nullopt,
       {{"kernel_shape", ints({2, 2})}, {"strides", ints({2, 2})}},
       false,
       "2x2 stride 2"},
      {"GlobalAveragePool", {2, 3, 2, 2}, std::nullopt, std::nullopt, {}, false, "2x2 planes"},
      {"GlobalMaxPool", {2, 3, 3, 5}, std::nullopt, std::nullopt, {}, false, "3x5 planes"},
      {"AveragePool",
       {1, 2, 5, 5},
       std::nullopt,
       std::nullopt,
       {{"kernel_shape", ints({2, 2})}, {"pads", ints({1, 1, 1, 1})}, {"count_include_pad", one}},
       false,
       "padded, pads counted"},
      // The last windows hang over the end and average 2 values (1 in the corner): on cuDNN,
      // the whole-window average scaled by 2 (4), then rounded.
      {"AveragePool",
       {1, 2, 5, 5},
       std::nullopt,
       std::nullopt,
       {{"kernel_shape", ints({2, 2})}, {"strides", ints({2, 2})}, {"ceil_mode", one}},
       false,
       "ceil, partial windows"},
  };
}

class ConvPool16Bit : public ::testing::TestWithParam<testing::HalfOnDevice> {};

TEST_P(ConvPool16Bit, IsTheFloat32ResultRoundedOnce) {
  const auto [dtype, device_type] = GetParam();
  const std::string why = testing::accelerator_unusable_reason(device_type);
  if (!why.empty())
    GTEST_SKIP() << "needs a " << device_type_name(device_type) << " device: " << why;
  const Device device{device_type, 0};
  unsigned seed = 1;
  for (const Case& c : cases()) {
    SCOPED_TRACE(c.op + " " + c.label);
    auto [x32, x16] = eighths(dtype, c.x, seed++);
    std::vector<std::pair<std::string, Tensor>> wide_constants, narrow_constants;
    for (const auto& [name, shape] : {std::pair{"w", c.w}, std::pair{"b", c.b}}) {
      if (!shape) continue;
      auto [v32, v16] = eighths(dtype, *shape, seed++);
      wide_constants.emplace_back(name, v32);
      narrow_constants.emplace_back(name, v16);
    }
    Model wide(one_node_graph(c.op, DType::Float32, c.x, wide_constants, c.attributes, c.indices),
               Device::cpu());
    Model narrow(one_node_graph(c.op, dtype, c.x, narrow_constants, c.attributes, c.indices),
                 device);
    ASSERT_EQ(narrow.plan()->graph().nodes.size(), 1u) << "ran between Casts";
    const std::vector<Tensor> want = wide.run(std::vector<Tensor>{x32});
    const std::vector<Tensor> got = narrow.run(std::vector<Tensor>{x16.to(device)});
    ASSERT_EQ(got.size(), want.size());
    const Tensor y = got[0].to(Device::cpu());
    ASSERT_EQ(y.dtype(), dtype);
    ASSERT_EQ(y.shape(), want[0].shape());
    const bool rounded_twice = device_type == DeviceType::CUDA && c.b.has_value();
    for (int64_t i = 0; i < y.numel(); ++i) {
      const double once = rounded_16bit(want[0].data<float>()[i], dtype);
      if (rounded_twice)
        ASSERT_LE(std::abs(y.item_as_double(i) - once), testing::step_16bit(once, dtype))
            << "element " << i;
      else
        ASSERT_EQ(y.item_as_double(i), once) << "element " << i;
    }
    if (c.indices) {
      const Tensor indices = got[1].to(Device::cpu());
      ASSERT_EQ(indices.dtype(), DType::Int64);
      ASSERT_EQ(indices.shape(), want[1].shape());
      for (int64_t i = 0; i < indices.numel(); ++i)
        ASSERT_EQ(indices.data<int64_t>()[i], want[1].data<int64_t>()[i]) << "index " << i;
    }
  }
}

TEST_P(ConvPool16Bit, ConvRefusesMixedDtypesNamingBoth) {
  const auto [dtype, device_type] = GetParam();
  if (device_type != DeviceType::CPU) GTEST_SKIP() << "the message is the CPU kernel's";
  auto [w32, w16] = eighths(dtype, {2, 3, 1, 1}, 7);
  // X in 16 bits, W in float32: a model that type inference would refuse, run without it.
  auto graph = one_node_graph("Conv", dtype, {1, 3, 2, 2}, {{"w", w32}}, {});
  Model model(graph, Device::cpu());
  auto [x32, x16] = eighths(dtype, {1, 3, 2, 2}, 8);
  try {
    model.run(std::vector<Tensor>{x16});
    FAIL() << "a Conv of " << dtype_name(dtype) << " X and float32 W ran";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()),
              "[Conv] node 'Conv_under_test': expects X, W and B of one dtype, got " +
                  std::string(dtype_name(dtype)) +
                  "[1, 3, 2, 2] on cpu:0, float32[2, 3, 1, 1] on cpu:0");
  }
}

INSTANTIATE_TEST_SUITE_P(Devices, ConvPool16Bit, testing::half_on_devices(),
                         testing::half_on_device_name);

}  // namespace
}  // namespace dprun
