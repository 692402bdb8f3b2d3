// Shape arithmetic on the host (engine/plan.h): in a plan for CUDA, the nodes that compute small
// integer tensors from tensor shapes run their CPU kernels and keep their results on the host,
// and the device kernels that read a shape (Reshape's target, KernelDef::host_inputs) take it
// from there. Placement needs no GPU; the runs are in tests/unit/accelerator_model_test.cpp.
#include <gtest/gtest.h>

#include <cstdlib>
#include <map>
#include <string>
#include <vector>

#include "engine/plan.h"
#include "graph_test_util.h"
#include "loader/onnx_loader.h"
#include "op_test_util.h"
#include "cuda/source_dir.h"

namespace dprun {
namespace {

using testing::flatten_by_shape_graph;

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
  // Gather's data is x, not a shape: only the Shape, which reads s's dims, moves.
  const auto g = testing::gather_by_shape_graph();
  const std::vector<NodePlacement> placed = place_nodes(*g, DeviceType::CUDA);
  ASSERT_EQ(placed.size(), 2u);
  EXPECT_TRUE(placed[0].shape_arithmetic);
  EXPECT_FALSE(placed[1].shape_arithmetic);
  EXPECT_EQ(placed[1].device, DeviceType::CUDA);
  // Gather reads its indices on the device: the plan moves the host value there (run in
  // accelerator_model_test.cpp).
  const auto plan = Plan::build(g, DeviceType::CUDA);
  EXPECT_TRUE(plan->steps()[1].inputs_in_place.empty());
}

TEST(CudaShapeArithmetic, TheBundledTransformerComputesItsShapesOnTheHost) {
  const auto graph =
      load_graph(dprun::testing::cuda_test_source_dir() + "/models/transformer.onnx");
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

}  // namespace
}  // namespace dprun
