// The CUDA kernels of Constant, Clip, Pad, Range and PRelu beyond their case tables
// (ops/array/data_movement_cases.cpp for Constant, Pad and Range; ops/elementwise/
// elementwise_unary_cases.cpp for Clip, elementwise_binary_cases.cpp for PRelu): bad arguments
// fail with the CPU's messages, and the bundled models are planned with every node on cuda.
#include <gtest/gtest.h>

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "cuda_test_util.h"
#include "engine/plan.h"
#include "loader/onnx_loader.h"
#include "op_cases/op_cases.h"
#include "op_test_util.h"
#include "cuda/source_dir.h"

namespace dprun {
namespace {

using testing::floats;
using testing::int64s;
using testing::node_with;
using testing::OpCase;
using testing::scalar;

/// The CUDA kernels fail on bad arguments with the CPU kernels' messages (shared parsing).
TEST(CudaClipPadRange, BadArgumentsFailAsOnTheCpu) {
  DPRUN_REQUIRE_CUDA_GPU();
  auto message = [](const OpCase& c, Device device) -> std::string {
    const std::vector<Tensor> inputs = testing::make_inputs(c, 1);
    try {
      testing::run_node(c.node, inputs, c.opset, "", device);
    } catch (const Error& e) {
      return e.what();
    }
    return "no error";
  };
  const std::vector<OpCase> bad = {
      {.name = "delta0",
       .node = node_with("Range", {"a", "b", "c"}),
       .inputs = {scalar(DType::Int64, 0), scalar(DType::Int64, 5), scalar(DType::Int64, 0)},
       .opset = 11},
      {.name = "pads_length",
       .node = node_with("Pad", {"x", "pads"}),
       .inputs = {floats({2, 3}), int64s({1, 1, 1})},
       .opset = 13},
      {.name = "reflect_empty",
       .node = node_with("Pad", {"x", "pads"}, {{"mode", Attribute::of_string("reflect")}}),
       .inputs = {floats({0, 3}), int64s({1, 0, 1, 0})},
       .opset = 13},
      {.name = "clip_bound_dtype",
       .node = node_with("Clip", {"x", "lo"}),
       .inputs = {floats({2, 3}), scalar(DType::Float64, 0)},
       .opset = 13},
      {.name = "prelu_slope",
       .node = node_with("PRelu", {"x", "slope"}),
       .inputs = {floats({2, 3}), floats({4})},
       .opset = 16}};
  for (const OpCase& c : bad) {
    SCOPED_TRACE(c.name);
    const std::string cpu = message(c, Device::cpu());
    EXPECT_NE(cpu, "no error");
    EXPECT_EQ(message(c, Device::cuda(0)), cpu);
  }
}

/// Every node of the bundled models has a CUDA kernel: a plan for CUDA runs none on the host
/// but its shape arithmetic (CudaShapeArithmetic).
TEST(CudaClipPadRange, BundledModelsPlanEveryNodeOnCuda) {
  const std::map<std::string, size_t> nodes = {
      {"transformer.onnx", 199}, {"cnn.onnx", 13}, {"mlp.onnx", 5}};
  for (const auto& [file, count] : nodes) {
    SCOPED_TRACE(file);
    auto plan = Plan::build(load_graph(dprun::testing::cuda_test_source_dir() + "/models/" + file),
                            DeviceType::CUDA);
    ASSERT_EQ(plan->steps().size(), count);
    size_t placed = 0;
    for (const PlanStep& step : plan->steps()) {
      EXPECT_TRUE(step.kernel_device == DeviceType::CUDA || step.shape_arithmetic)
          << plan->graph().nodes[step.node_index].describe() << " runs on the host";
      placed += step.kernel_device == DeviceType::CUDA || step.shape_arithmetic;
    }
    EXPECT_EQ(placed, count);
  }
}

}  // namespace
}  // namespace dprun
