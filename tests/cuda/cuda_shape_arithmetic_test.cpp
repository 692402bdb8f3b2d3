// Shape arithmetic on the host (engine/plan.h): in a plan for CUDA, the nodes that compute small
// integer tensors from tensor shapes run their CPU kernels and keep their results on the host,
// and the device kernels that read a shape (Reshape's target, KernelDef::host_inputs) take it
// from there. Placement needs no GPU; running does.
#include <gtest/gtest.h>

#include <cstdlib>
#include <map>
#include <string>
#include <vector>

#include "cuda_op_cases.h"
#include "cuda_test_util.h"
#include "engine/model.h"
#include "engine/plan.h"
#include "graph_test_util.h"
#include "loader/onnx_loader.h"
#include "op_test_util.h"

namespace dprun {
namespace {

TensorType int64s_of_rank(size_t rank, int64_t dim = 1) {
  return {DType::Int64, SymbolicShape(rank, Dim::known(dim))};
}

Tensor int64s(std::vector<int64_t> values) {
  const auto n = static_cast<int64_t>(values.size());
  return Tensor::from_vector<int64_t>({n}, values);
}

/// y = Relu(Reshape(x, [dim 0 of x, -1])), the target computed as exporters write it:
/// Shape, Gather, Unsqueeze, Concat with a constant. Intermediate types as ONNX inference gives
/// them, unless `typed` is false.
std::shared_ptr<Graph> flatten_by_shape_graph(bool typed = true) {
  using testing::make_node;
  Node concat = make_node("Concat", {"batch1", "minus_one"}, {"target"});
  concat.attributes["axis"] = Attribute::of_int(0);
  auto g = testing::make_graph(
      {make_node("Shape", {"x"}, {"dims"}), make_node("Gather", {"dims", "zero"}, {"batch"}),
       make_node("Unsqueeze", {"batch", "axes"}, {"batch1"}), concat,
       make_node("Reshape", {"x", "target"}, {"flat"}), make_node("Relu", {"flat"}, {"y"})},
      {{"x", DType::Float32}}, {"y"});
  g->opset_imports[""] = 17;
  g->inputs[0].type.shape = SymbolicShape{Dim::named("batch"), Dim::known(3), Dim::known(4)};
  g->initializers["zero"] = Tensor::scalar(int64_t{0});
  g->initializers["axes"] = int64s({0});
  g->initializers["minus_one"] = int64s({-1});
  if (typed) {
    g->value_types["dims"] = int64s_of_rank(1, 3);
    g->value_types["batch"] = int64s_of_rank(0);
    g->value_types["batch1"] = int64s_of_rank(1);
    g->value_types["target"] = int64s_of_rank(1, 2);
    g->value_types["flat"] = {DType::Float32, SymbolicShape{Dim::named("batch"), Dim::known(12)}};
  }
  return g;
}

TEST(CudaShapeArithmetic, ShapesComputedFromShapesArePlacedOnTheHost) {
  const auto graph = flatten_by_shape_graph();
  const std::vector<NodePlacement> placed = place_nodes(*graph, DeviceType::CUDA);
  ASSERT_EQ(placed.size(), 6u);
  const std::vector<std::string> on_host = {"Shape", "Gather", "Unsqueeze", "Concat"};
  for (size_t n = 0; n < placed.size(); ++n) {
    SCOPED_TRACE(placed[n].node->describe());
    const bool shape_arithmetic = n < on_host.size();
    if (shape_arithmetic) {
      EXPECT_EQ(placed[n].node->op_type, on_host[n]);
    }
    EXPECT_EQ(placed[n].shape_arithmetic, shape_arithmetic);
    EXPECT_EQ(placed[n].device, shape_arithmetic ? DeviceType::CPU : DeviceType::CUDA);
  }
  // The plan agrees: CPU kernels, the constant inputs read from the plan's host copies, and the
  // Reshape on the GPU taking its target where it is.
  const auto plan = Plan::build(graph, DeviceType::CUDA);
  const PlanStep& gather = plan->steps()[1];
  EXPECT_TRUE(gather.shape_arithmetic);
  ASSERT_EQ(gather.host_constants.size(), 1u);
  EXPECT_EQ(gather.host_constants.begin()->first, 1u);
  EXPECT_EQ(gather.host_constants.begin()->second.device(), Device::cpu());
  const PlanStep& shape = plan->steps()[0];
  EXPECT_EQ(shape.inputs_in_place, std::vector<bool>{true});  // Shape reads x's dims only
  const PlanStep& reshape = plan->steps()[4];
  EXPECT_EQ(reshape.kernel_device, DeviceType::CUDA);
  EXPECT_EQ(reshape.inputs_in_place, (std::vector<bool>{false, true}));
  // On the CPU nothing moves.
  for (const NodePlacement& p : place_nodes(*graph, DeviceType::CPU))
    EXPECT_FALSE(p.shape_arithmetic) << p.node->describe();
}

TEST(CudaShapeArithmetic, TheEnvironmentCanKeepEveryNodeOnTheDevice) {
  ::setenv("DPRUN_NO_SHAPE_ARITHMETIC", "1", 1);
  const std::vector<NodePlacement> placed =
      place_nodes(*flatten_by_shape_graph(), DeviceType::CUDA);
  ::unsetenv("DPRUN_NO_SHAPE_ARITHMETIC");
  ASSERT_EQ(placed.size(), 6u);
  for (const NodePlacement& p : placed) {
    EXPECT_FALSE(p.shape_arithmetic) << p.node->describe();
    EXPECT_EQ(p.device, DeviceType::CUDA) << p.node->describe();
  }
}

TEST(CudaShapeArithmetic, WithoutTypesNothingMoves) {
  // Output types decide what is small enough to keep on the host; without them every node
  // stays on the GPU.
  for (const NodePlacement& p : place_nodes(*flatten_by_shape_graph(false), DeviceType::CUDA)) {
    EXPECT_FALSE(p.shape_arithmetic) << p.node->describe();
    EXPECT_EQ(p.device, DeviceType::CUDA) << p.node->describe();
  }
}

TEST(CudaShapeArithmetic, AValueReadAsDataIsNotShapeArithmetic) {
  // Gather's data is x itself, not a shape: only the Shape, which reads x's dims, moves.
  using testing::make_node;
  auto g = testing::make_graph(
      {make_node("Shape", {"x"}, {"dims"}), make_node("Gather", {"x", "dims"}, {"picked"})},
      {{"x", DType::Int64}}, {"picked"});
  g->opset_imports[""] = 17;
  g->inputs[0].type.shape = SymbolicShape{Dim::known(5)};
  g->value_types["dims"] = int64s_of_rank(1, 1);
  g->value_types["picked"] = int64s_of_rank(1, 1);
  const std::vector<NodePlacement> placed = place_nodes(*g, DeviceType::CUDA);
  ASSERT_EQ(placed.size(), 2u);
  EXPECT_TRUE(placed[0].shape_arithmetic);
  EXPECT_FALSE(placed[1].shape_arithmetic);
  EXPECT_EQ(placed[1].device, DeviceType::CUDA);
  // Gather reads its indices on the device: the plan moves the host value there.
  const auto plan = Plan::build(g, DeviceType::CUDA);
  EXPECT_TRUE(plan->steps()[1].inputs_in_place.empty());

  DPRUN_REQUIRE_CUDA_GPU();
  const Tensor x = int64s({7, 8, 9, 10, 11});
  const Tensor got = Model(g, Device::cuda(0)).run({x})[0];
  EXPECT_EQ(got.device(), Device::cuda(0));
  testing::expect_device_output_matches(got, Model(g, Device::cpu()).run({x})[0], 0.0);
}

TEST(CudaShapeArithmetic, TheBundledTransformerComputesItsShapesOnTheHost) {
  const auto graph = load_graph(std::string(DPRUN_SOURCE_DIR) + "/models/transformer.onnx");
  std::map<std::string, int> moved;
  size_t on_cuda = 0;
  for (const NodePlacement& p : place_nodes(*graph, DeviceType::CUDA)) {
    if (p.shape_arithmetic) ++moved[p.node->op_type];
    on_cuda += p.device == DeviceType::CUDA;
    // Whatever reads a shape on the GPU reads it on the host: no Reshape moves.
    if (p.node->op_type == "Reshape") {
      EXPECT_EQ(p.device, DeviceType::CUDA);
    }
  }
  // Every Shape and what computes Reshape targets and position ids from them; the two
  // embedding Gathers (of float32 tables) stay on the GPU.
  EXPECT_EQ(moved, (std::map<std::string, int>{{"Cast", 1},
                                               {"Concat", 8},
                                               {"Gather", 17},
                                               {"Range", 1},
                                               {"Shape", 17},
                                               {"Unsqueeze", 16}}));
  EXPECT_EQ(on_cuda, 199u - 60u);
}

TEST(CudaShapeArithmetic, ResultsMatchTheCpu) {
  DPRUN_REQUIRE_CUDA_GPU();
  const auto graph = flatten_by_shape_graph();
  const Tensor x = testing::random_floats({5, 3, 4}, 11);
  const Tensor want = Model(graph, Device::cpu()).run({x})[0];
  for (int run = 0; run < 2; ++run) {  // the second run reuses the plan's host copies
    const Tensor got = Model(graph, Device::cuda(0)).run({x})[0];
    EXPECT_EQ(got.device(), Device::cuda(0));
    testing::expect_device_output_matches(got, want, 0.0);
  }
}

}  // namespace
}  // namespace dprun
