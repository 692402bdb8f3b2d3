// Where a plan for a device type other than the CPU runs each node: on that device where it
// has a kernel, else on the host with the node's CPU kernel. Planning needs no device, so
// these run on every machine and in every build.
#include <gtest/gtest.h>

#include "engine/plan.h"

namespace dprun {
namespace {

// A kernel registered for CUDA in the test domain, so that placement on CUDA has a node to
// keep there in every build. Planning never runs it.
class NeverRun : public OpKernel {
 public:
  explicit NeverRun(const KernelInfo&) {}
  void compute(KernelContext& ctx) const override { ctx.fail("a placement test kernel ran"); }
};
DPRUN_REGISTER_KERNEL({.domain = "dprun.placement_test",
                       .op_type = "OnCuda",
                       .device = DeviceType::CUDA,
                       .factory = make_kernel<NeverRun>});

Node node(std::string op, std::string domain, std::string in, std::string out) {
  Node n;
  n.name = out;
  n.op_type = std::move(op);
  n.domain = std::move(domain);
  n.inputs = {std::move(in)};
  n.outputs = {std::move(out)};
  return n;
}

// x -> OnCuda -> Relu -> OnCuda -> y, and optionally an op no device has.
std::shared_ptr<Graph> graph(bool with_unknown_op) {
  auto g = std::make_shared<Graph>();
  g->opset_imports[""] = 17;
  g->opset_imports["dprun.placement_test"] = 1;
  g->inputs.push_back({"x", {DType::Float32, SymbolicShape{Dim::known(4)}}});
  g->nodes.push_back(node("OnCuda", "dprun.placement_test", "x", "a"));
  g->nodes.push_back(node("Relu", "", "a", "b"));
  g->nodes.push_back(node("OnCuda", "dprun.placement_test", "b", "c"));
  std::string last = "c";
  if (with_unknown_op) {
    g->nodes.push_back(node("NoSuchOp", "", "c", "d"));
    last = "d";
  }
  g->outputs.push_back({last, {DType::Float32, std::nullopt}});
  return g;
}

TEST(PlanPlacement, ANodeWithoutAKernelOnTheDeviceFallsBackToItsCpuKernel) {
  auto g = graph(false);
  auto plan = Plan::build(g, DeviceType::CUDA);
  ASSERT_EQ(plan->steps().size(), 3u);
  EXPECT_EQ(plan->device_type(), DeviceType::CUDA);
  EXPECT_EQ(plan->steps()[0].kernel_device, DeviceType::CUDA);
  EXPECT_EQ(plan->steps()[2].kernel_device, DeviceType::CUDA);
  // Relu: on CUDA where the build has a CUDA Relu, else on the host with its CPU kernel.
  const bool cuda_relu = KernelRegistry::instance().create(
                             {g->nodes[1], 17, DeviceType::CUDA, {}, {}, g.get()}) != nullptr;
  EXPECT_EQ(plan->steps()[1].kernel_device, cuda_relu ? DeviceType::CUDA : DeviceType::CPU);
}

TEST(PlanPlacement, PlaceNodesSaysWhereEachNodeRunsAndWhy) {
  const auto g = graph(true);  // the placements point into it
  std::vector<NodePlacement> on_cuda = place_nodes(*g, DeviceType::CUDA);
  ASSERT_EQ(on_cuda.size(), 4u);
  EXPECT_EQ(on_cuda[0].node->op_type, "OnCuda");
  EXPECT_EQ(on_cuda[0].device, DeviceType::CUDA);
  EXPECT_EQ(on_cuda[0].why_not, "");
  EXPECT_EQ(on_cuda[3].device, std::nullopt);
  EXPECT_EQ(on_cuda[3].why_not, "unknown op");

  // On the CPU there is no fallback: the CUDA-only op has no placement.
  const auto cpu_graph = graph(false);
  std::vector<NodePlacement> on_cpu = place_nodes(*cpu_graph, DeviceType::CPU);
  EXPECT_EQ(on_cpu[0].device, std::nullopt);
  EXPECT_EQ(on_cpu[0].why_not, "no kernel for opset 1 on cpu");
  EXPECT_EQ(on_cpu[1].device, DeviceType::CPU);
}

TEST(PlanPlacement, ANodeWithNoKernelAnywhereFailsThePlanNamingIt) {
  try {
    Plan::build(graph(true), DeviceType::CUDA);
    FAIL() << "the plan was built";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(),
                 "1 node has no cuda kernel (nor a cpu kernel to fall back on): [NoSuchOp] node "
                 "'d' (unknown op)");
  }
}

}  // namespace
}  // namespace dprun
