// The gradient of an overlapping MaxPool before opset 16 as one ScatterAdd node
// (engine/rewrites/op_fusion.h): which chains the CPU backend fuses, and the fused graph against
// the unfused one (whose gradient gradient_cnn_test.cpp checks by finite differences).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "engine/rewrites/rewrite_domain.h"
#include "gradient_check.h"
#include "op_test_util.h"

namespace dprun {
namespace {

using namespace dprun::testing;

// One forward MaxPool: its attributes, X's shape and the phase groups its gradient sums.
struct PoolCase {
  std::string name;
  std::map<std::string, Attribute> attrs;
  Shape x;
  int phases;
};

std::vector<PoolCase> pool_cases() {
  auto ints = [](std::vector<int64_t> v) { return Attribute::of_ints(std::move(v)); };
  return {
      {"3x3 stride 2 pad 1, as a ResNet stem",
       {{"kernel_shape", ints({3, 3})}, {"strides", ints({2, 2})}, {"pads", ints({1, 1, 1, 1})}},
       {2, 3, 9, 8},
       4},
      {"1-D kernel 3 stride 1", {{"kernel_shape", ints({3})}}, {2, 2, 11}, 3},
      {"overlap on one axis only",
       {{"kernel_shape", ints({3, 2})}, {"strides", ints({2, 2})}},
       {1, 2, 7, 6},
       2},
      {"a dilation",
       {{"kernel_shape", ints({2, 2})}, {"dilations", ints({2, 1})}},
       {1, 2, 6, 5},
       6},
      {"3-D kernel 2 stride 1", {{"kernel_shape", ints({2, 2, 2})}}, {1, 2, 4, 3, 4}, 8},
  };
}

// The forward graph and dX for the seed dY, in float64 at `opset`.
std::shared_ptr<Graph> gradient_graph(const PoolCase& c, int64_t opset) {
  auto forward = make_graph({node("MaxPool", {"x"}, {"y"}, c.attrs)}, {in("x", c.x, 1, -3, 3)}, "y",
                            opset, Decl::Full);
  auto g = std::make_shared<Graph>(*forward);
  GradientResult r = build_gradient(*forward, GradientSpec{{"x"}, "y", "dY"});
  g->inputs.push_back({"dY", {DType::Float64, std::nullopt}});
  g->nodes.insert(g->nodes.end(), r.nodes.begin(), r.nodes.end());
  g->outputs = {{r.gradients[0], {}}};
  return g;
}

std::vector<Tensor> feeds(const PoolCase& c, const std::shared_ptr<Graph>& g) {
  const Tensor x = in("x", c.x, 1, -3, 3).value;
  Model forward(make_graph({node("MaxPool", {"x"}, {"y"}, c.attrs)}, {in("x", c.x, 1, -3, 3)}, "y",
                           g->opset(""), Decl::Full),
                Device::cpu());
  return {x, random_tensor(forward.run({x})[0].shape(), -1, 1, 7)};
}

Model model(std::shared_ptr<Graph> g, bool fuse) {
  return Model(std::move(g), Device::cpu(), {.channels_last = false, .fuse_ops = fuse});
}

void expect_equal_within(const Tensor& got, const Tensor& want, double tolerance) {
  ASSERT_EQ(got.shape(), want.shape());
  for (int64_t i = 0; i < want.numel(); ++i)
    ASSERT_NEAR(got.item_as_double(i), want.item_as_double(i), tolerance) << "element " << i;
}

TEST(MaxPoolGradScatter, EveryPhaseLayoutGivesTheUnfusedGradient) {
  for (const PoolCase& c : pool_cases()) {
    SCOPED_TRACE(c.name);
    auto g = gradient_graph(c, 13);
    ASSERT_EQ(count_ops(*g, "ScatterElements"), c.phases);
    const std::vector<Tensor> in = feeds(c, g);
    Model fused = model(g, true);
    const Graph& plan = *fused.plan()->graph_ptr();
    EXPECT_EQ(count_ops(plan, "ScatterAdd"), 1);
    EXPECT_EQ(count_ops(plan, "ScatterElements"), 0);
    EXPECT_EQ(count_ops(plan, "Sum"), 0);
    EXPECT_EQ(count_ops(plan, "Slice"), 0);
    // Only the order of the sums where windows share an argmax differs.
    expect_equal_within(fused.run(in)[0], model(g, false).run(in)[0], 1e-12);
  }
}

TEST(MaxPoolGradScatter, FromOpset16TheRuleScattersWithAddItself) {
  const PoolCase c = pool_cases()[0];
  auto g = gradient_graph(c, 16);
  EXPECT_EQ(count_ops(*g, "ScatterElements"), 1);
  EXPECT_EQ(count_ops(*g, "Sum"), 0);
  EXPECT_EQ(count_ops(*model(g, true).plan()->graph_ptr(), "ScatterAdd"), 0);
}

TEST(MaxPoolGradScatter, LeavesAloneWhatItDoesNotCompute) {
  const PoolCase c = pool_cases()[0];
  auto fused_count = [](const std::shared_ptr<Graph>& g) {
    return count_ops(*model(g, true).plan()->graph_ptr(), "ScatterAdd");
  };
  auto find = [](Graph& g, const std::string& op) {
    return std::find_if(g.nodes.begin(), g.nodes.end(),
                        [&](const Node& n) { return n.op_type == op; });
  };
  EXPECT_EQ(fused_count(gradient_graph(c, 13)), 1);
  // Scatters into ones: the Sum counts them once per group.
  auto g = gradient_graph(c, 13);
  auto fill = find(*g, "ConstantOfShape");
  ASSERT_NE(fill, g->nodes.end());
  fill->attributes["value"] = Attribute::of_tensor(Tensor::from_vector<double>({1}, {1.0}));
  EXPECT_EQ(fused_count(g), 0);
  const std::vector<Tensor> in = feeds(c, g);
  expect_equal_within(model(g, true).run(in)[0], model(g, false).run(in)[0], 0);
  // float16 zeros: the kernel computes in float32 and float64 only.
  g = gradient_graph(c, 13);
  find(*g, "ConstantOfShape")->attributes["value"] =
      Attribute::of_tensor(Tensor::zeros({1}, DType::Float16));
  EXPECT_EQ(fused_count(g), 0);
  // A phase group missing from the Sum.
  g = gradient_graph(c, 13);
  auto sum = find(*g, "Sum");
  ASSERT_NE(sum, g->nodes.end());
  sum->inputs.pop_back();
  EXPECT_EQ(fused_count(g), 0);
  // One group's scatter is a result too.
  g = gradient_graph(c, 13);
  g->outputs.push_back({find(*g, "ScatterElements")->outputs[0], {}});
  EXPECT_EQ(fused_count(g), 0);
  // Slices that are not the phase groups of the MaxPool giving the indices.
  g = gradient_graph(c, 13);
  auto pool = std::find_if(g->nodes.begin(), g->nodes.end(), [](const Node& n) {
    return n.op_type == "MaxPool" && n.outputs.size() == 2;
  });
  ASSERT_NE(pool, g->nodes.end());
  pool->attributes["strides"] = Attribute::of_ints({3, 3});  // windows 3 apart: one phase each
  EXPECT_EQ(fused_count(g), 0);
}

Node scatter_add() {
  Node n = make_node("ScatterAdd", {"data", "indices", "updates"}, {"y"});
  n.domain = kRewriteDomain;
  n.name = "scatter";
  return n;
}

TEST(MaxPoolGradScatter, ScatterAddSumsRepeatedAndNegativeIndices) {
  const Tensor data = Tensor::from_vector<float>({2, 3}, {1, 2, 3, 4, 5, 6});
  const Tensor indices = Tensor::from_vector<int64_t>({2, 2}, {0, 5, -1, 0});
  const Tensor updates = Tensor::from_vector<float>({4}, {10, 20, 30, 40});
  const Tensor y = run_node(scatter_add(), {data, indices, updates}, 1, kRewriteDomain)[0];
  ASSERT_EQ(y.shape(), (Shape{2, 3}));
  EXPECT_EQ(std::vector<float>(y.data<float>(), y.data<float>() + 6),
            (std::vector<float>{51, 2, 3, 4, 5, 56}));
  const Tensor i32 = Tensor::from_vector<int32_t>({1}, {2});
  const Tensor d64 = Tensor::from_vector<double>({3}, {0, 0, 0});
  const Tensor u64 = Tensor::from_vector<double>({1}, {0.5});
  EXPECT_EQ(run_node(scatter_add(), {d64, i32, u64}, 1, kRewriteDomain)[0].data<double>()[2], 0.5);
}

TEST(MaxPoolGradScatter, ScatterAddNamesWhatDoesNotFit) {
  const Tensor data = Tensor::from_vector<float>({3}, {0, 0, 0});
  const Tensor one = Tensor::from_vector<float>({1}, {1});
  EXPECT_EQ(run_node_error(scatter_add(), {data, Tensor::from_vector<int64_t>({1}, {3}), one}, 1,
                           kRewriteDomain),
            "[ScatterAdd] node 'scatter': index 3 is out of range for 3 elements");
  EXPECT_EQ(run_node_error(scatter_add(), {data, Tensor::from_vector<int64_t>({1}, {-4}), one}, 1,
                           kRewriteDomain),
            "[ScatterAdd] node 'scatter': index -4 is out of range for 3 elements");
  EXPECT_EQ(run_node_error(scatter_add(), {data, Tensor::from_vector<int64_t>({2}, {0, 1}), one}, 1,
                           kRewriteDomain),
            "[ScatterAdd] node 'scatter': updates [1] and indices [2] must have one element "
            "count");
  EXPECT_EQ(run_node_error(scatter_add(),
                           {data, Tensor::from_vector<int64_t>({1}, {0}),
                            Tensor::from_vector<double>({1}, {1})},
                           1, kRewriteDomain),
            "[ScatterAdd] node 'scatter': updates are float64 but data is float32");
}

}  // namespace
}  // namespace dprun
