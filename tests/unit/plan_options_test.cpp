// PlanOptions reach every kernel: ModelOptions::plan is the KernelInfo::plan_options of the model's
// nodes and of its subgraphs' nodes (their plans are built by the control-flow kernels).
#include <gtest/gtest.h>

#include <atomic>
#include <memory>

#include "engine/model.h"
#include "engine/plan.h"
#include "graph_test_util.h"

namespace dprun {
namespace {

using testing::graph_attr;
using testing::make_graph;
using testing::make_node;

// How many RecordTf32 kernels were built with allow_tf32 on, and with it off.
std::atomic<int> built_with_tf32{0}, built_without_tf32{0};

/// Identity that counts the allow_tf32 of each KernelInfo it is built from.
class RecordTf32 : public OpKernel {
 public:
  explicit RecordTf32(const KernelInfo& info) {
    ++(info.plan_options.allow_tf32 ? built_with_tf32 : built_without_tf32);
  }
  void compute(KernelContext& ctx) const override { ctx.set_output(0, ctx.input(0)); }
};

DPRUN_REGISTER_KERNEL({.domain = "dprun.plan_options_test",
                       .op_type = "RecordTf32",
                       .factory = make_kernel<RecordTf32>});

Node record_node(const std::string& in, const std::string& out) {
  Node n = make_node("RecordTf32", {in}, {out});
  n.name = "record_" + out;
  n.domain = "dprun.plan_options_test";
  return n;
}

// y = RecordTf32(x), and an If whose two branches each hold a RecordTf32 of x.
std::shared_ptr<Graph> recording_graph() {
  auto then_g = make_graph({record_node("x", "t")}, {}, {"t"});
  auto else_g = make_graph({record_node("x", "e")}, {}, {"e"});
  Node branch = make_node("If", {"cond"}, {"z"});
  branch.name = "branch";
  branch.attributes["then_branch"] = graph_attr(then_g);
  branch.attributes["else_branch"] = graph_attr(else_g);
  auto g = make_graph({record_node("x", "y"), branch},
                      {{"cond", DType::Bool}, {"x", DType::Float32}}, {"y", "z"});
  g->opset_imports = {{"", 17}, {"dprun.plan_options_test", 1}};
  return g;
}

void reset_counts() {
  built_with_tf32 = 0;
  built_without_tf32 = 0;
}

TEST(PlanOptions, AllowTf32ReachesEveryKernelAndSubgraph) {
  reset_counts();
  Model tf32(recording_graph(), Device::cpu(), ModelOptions{.plan = {.allow_tf32 = true}});
  EXPECT_TRUE(tf32.plan()->options().allow_tf32);
  EXPECT_EQ(built_with_tf32, 3);  // the node and one in each branch
  EXPECT_EQ(built_without_tf32, 0);

  reset_counts();
  Model plain(recording_graph(), Device::cpu());
  EXPECT_FALSE(plain.plan()->options().allow_tf32);
  EXPECT_EQ(built_with_tf32, 0);
  EXPECT_EQ(built_without_tf32, 3);

  // The option changes no CPU result.
  const Tensor x = Tensor::from_vector<float>({2}, {1.5f, -2});
  auto a = tf32.run(std::vector<Tensor>{Tensor::scalar<bool>(true), x});
  auto b = plain.run(std::vector<Tensor>{Tensor::scalar<bool>(true), x});
  EXPECT_EQ(testing::values_of<float>(a[1]), testing::values_of<float>(b[1]));
}

TEST(PlanOptions, PlansBuiltDirectlyDefaultToFloat32Math) {
  reset_counts();
  auto plan = Plan::build(recording_graph(), DeviceType::CPU);
  EXPECT_FALSE(plan->options().allow_tf32);
  EXPECT_EQ(built_without_tf32, 3);
  reset_counts();
  plan = Plan::build(recording_graph(), DeviceType::CPU, {}, PlanOptions{.allow_tf32 = true});
  EXPECT_TRUE(plan->options().allow_tf32);
  EXPECT_EQ(built_with_tf32, 3);
}

}  // namespace
}  // namespace dprun
