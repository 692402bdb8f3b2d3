// The gradient of a training-mode BatchNormalization as one BatchNormTrainingGrad node
// (engine/rewrites/op_fusion.h): which chains the CPU backend fuses, and the fused kernel against
// the float64 gradient of the unfused graph (itself checked by finite differences in
// gradient_cnn_test.cpp).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "engine/rewrites/rewrite_domain.h"
#include "gradient_check.h"
#include "op_test_util.h"

namespace dprun {
namespace {

using namespace dprun::testing;

// One forward BatchNormalization: X's shape, the opset (which decides where the reductions and
// Unsqueeze take their axes) and how the graph declares its inputs.
struct BnCase {
  std::string name;
  Shape x;
  int64_t opset;
  Decl decl;
};

std::vector<BnCase> bn_cases() {
  return {
      {"NCHW, opset 15", {4, 3, 5, 6}, 15, Decl::Full},
      {"[N, C]", {6, 4}, 15, Decl::Full},
      {"1-D spatial, opset 18 (ReduceMean axes as an input)", {3, 2, 7}, 18, Decl::Full},
      {"3-D spatial, a dynamic batch", {2, 3, 2, 3, 4}, 17, Decl::Batch},
      {"every dim a symbol", {3, 4, 5, 5}, 18, Decl::Symbolic},
  };
}

std::vector<Input> bn_inputs(const BnCase& c, DType x_type, DType param_type) {
  const Shape p = {c.x[1]};
  std::vector<Input> inputs = {in("x", c.x, 1, -2, 3), in("scale", p, 2, 0.5, 2.0), in("b", p, 3),
                               in("mean", p, 4), in("var", p, 5, 0.2, 1.5)};
  for (size_t k = 0; k < inputs.size(); ++k)
    if ((k == 0 ? x_type : param_type) == DType::Float32)
      inputs[k].value = to_float32(inputs[k].value);
  return inputs;
}

Node training_bn() {
  return node("BatchNormalization", {"x", "scale", "b", "mean", "var"}, {"y", "rm", "rv"},
              {{"training_mode", Attribute::of_int(1)}, {"epsilon", Attribute::of_float(1e-3f)}});
}

// The forward graph and the gradients of `wrt` for the seed dY, which has X's type.
std::shared_ptr<Graph> gradient_graph(const BnCase& c, DType x_type, DType param_type,
                                      const std::vector<std::string>& wrt) {
  auto forward =
      make_graph({training_bn()}, bn_inputs(c, x_type, param_type), "y", c.opset, c.decl);
  auto g = std::make_shared<Graph>(*forward);
  GradientResult r = build_gradient(*forward, GradientSpec{wrt, "y", "dY"});
  g->inputs.push_back({"dY", {x_type, std::nullopt}});
  g->nodes.insert(g->nodes.end(), r.nodes.begin(), r.nodes.end());
  g->outputs.clear();
  for (const std::string& name : r.gradients) g->outputs.push_back({name, {}});
  return g;
}

std::vector<Tensor> feeds(const BnCase& c, DType x_type, DType param_type) {
  std::vector<Tensor> f = feeds_of(bn_inputs(c, x_type, param_type));
  Tensor dy = random_tensor(c.x, -1, 1, 7);
  f.push_back(x_type == DType::Float32 ? to_float32(dy) : dy);
  return f;
}

// Each result against its float64 counterpart, within 1e-5 of the largest element.
void expect_near(const std::vector<Tensor>& got, const std::vector<Tensor>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t k = 0; k < want.size(); ++k) {
    SCOPED_TRACE("gradient " + std::to_string(k));
    ASSERT_EQ(got[k].shape(), want[k].shape());
    double scale = 0;
    for (int64_t i = 0; i < want[k].numel(); ++i)
      scale = std::max(scale, std::abs(want[k].item_as_double(i)));
    for (int64_t i = 0; i < want[k].numel(); ++i)
      ASSERT_NEAR(got[k].item_as_double(i), want[k].item_as_double(i), 1e-5 * scale)
          << "element " << i;
  }
}

Model fused_model(std::shared_ptr<Graph> g) {
  return Model(std::move(g), Device::cpu(), {.channels_last = false, .fuse_ops = true});
}

TEST(BatchNormTrainingGrad, MatchesTheFloat64GradientOfEveryShape) {
  const std::vector<std::string> wrt = {"x", "scale", "b"};
  for (const BnCase& c : bn_cases()) {
    SCOPED_TRACE(c.name);
    Model reference(gradient_graph(c, DType::Float64, DType::Float64, wrt), Device::cpu());
    const std::vector<Tensor> want = reference.run(feeds(c, DType::Float64, DType::Float64));
    Model fused = fused_model(gradient_graph(c, DType::Float32, DType::Float32, wrt));
    const Graph& plan = *fused.plan()->graph_ptr();
    EXPECT_EQ(count_ops(plan, "BatchNormTrainingGrad"), 1);
    EXPECT_EQ(count_ops(plan, "ReduceMean"), 0);
    EXPECT_EQ(count_ops(plan, "ReduceSum"), 0);
    EXPECT_EQ(count_ops(plan, "Size"), 0);
    expect_near(fused.run(feeds(c, DType::Float32, DType::Float32)), want);
  }
}

TEST(BatchNormTrainingGrad, FusesWithParametersOfAnotherTypeOrFrozen) {
  const BnCase c = bn_cases()[0];
  // float64 scale and B: the rule casts scale to X's type first; the fused node reads the Cast.
  Model reference(gradient_graph(c, DType::Float64, DType::Float64, {"x", "scale", "b"}),
                  Device::cpu());
  const std::vector<Tensor> want = reference.run(feeds(c, DType::Float64, DType::Float64));
  Model mixed = fused_model(gradient_graph(c, DType::Float32, DType::Float64, {"x", "scale", "b"}));
  EXPECT_EQ(count_ops(*mixed.plan()->graph_ptr(), "BatchNormTrainingGrad"), 1);
  const std::vector<Tensor> got = mixed.run(feeds(c, DType::Float32, DType::Float64));
  EXPECT_EQ(got[1].dtype(), DType::Float64);
  expect_near(got, want);
  // Frozen scale and B: dX alone is wanted, and the fused node's sums feed it only.
  Model x_only = fused_model(gradient_graph(c, DType::Float32, DType::Float32, {"x"}));
  EXPECT_EQ(count_ops(*x_only.plan()->graph_ptr(), "BatchNormTrainingGrad"), 1);
  expect_near(x_only.run(feeds(c, DType::Float32, DType::Float32)), {want[0]});
}

TEST(BatchNormTrainingGrad, LeavesAloneWhatItDoesNotCompute) {
  const BnCase c = bn_cases()[0];
  Model reference(gradient_graph(c, DType::Float64, DType::Float64, {"x", "scale", "b"}),
                  Device::cpu());
  const std::vector<Tensor> want = reference.run(feeds(c, DType::Float64, DType::Float64));
  auto fused_count = [](const std::shared_ptr<Graph>& g) {
    return count_ops(*fused_model(g).plan()->graph_ptr(), "BatchNormTrainingGrad");
  };
  // No dX wanted: the chain ends in the parameters' sums.
  auto params_only = gradient_graph(c, DType::Float32, DType::Float32, {"scale", "b"});
  EXPECT_EQ(fused_count(params_only), 0);
  expect_near(fused_model(params_only).run(feeds(c, DType::Float32, DType::Float32)),
              {want[1], want[2]});
  // float64 X: the fused kernel is float32 only.
  EXPECT_EQ(fused_count(gradient_graph(c, DType::Float64, DType::Float64, {"x", "scale", "b"})), 0);
  // A value inside the chain (the batch mean) is also a result.
  auto g = gradient_graph(c, DType::Float32, DType::Float32, {"x", "scale", "b"});
  auto mean = std::find_if(g->nodes.begin(), g->nodes.end(),
                           [](const Node& n) { return n.op_type == "ReduceMean"; });
  ASSERT_NE(mean, g->nodes.end());
  g->outputs.push_back({mean->outputs[0], {}});
  EXPECT_EQ(fused_count(g), 0);
  // An epsilon other than a constant: the Add reads a graph input.
  g = gradient_graph(c, DType::Float32, DType::Float32, {"x", "scale", "b"});
  auto add = std::find_if(g->nodes.begin(), g->nodes.end(), [&](const Node& n) {
    return n.op_type == "Add" && n.inputs[0].find("ReduceMean") != std::string::npos;
  });
  ASSERT_NE(add, g->nodes.end());
  add->inputs[1] = "eps";
  g->inputs.push_back({"eps", {DType::Float32, SymbolicShape{}}});
  EXPECT_EQ(fused_count(g), 0);
}

Node grad_node() {
  Node n = make_node("BatchNormTrainingGrad", {"x", "dy", "scale"}, {"dx", "dscale", "db"});
  n.domain = kRewriteDomain;
  n.name = "bn_grad";
  n.attributes["epsilon"] = Attribute::of_float(1e-5f);
  return n;
}

TEST(BatchNormTrainingGrad, HandComputedChannel) {
  // One channel of X = [1, 2, 6] (rows of [3, 1]): mean 3, deviations d = [-2, -1, 3], var 14/3;
  // with epsilon e, inv = 1 / sqrt(14/3 + e). dY = [1, 0, 2]: sum(dY) = 3,
  // sum(dY * xhat) = inv * (-2 + 0 + 6) = 4 inv, and with scale 2
  // dX = 2 inv (dY - (3 + d inv * 4 inv) / 3) = 2 inv (dY - 1 - 4 d inv^2 / 3).
  Node n = grad_node();
  n.attributes["epsilon"] = Attribute::of_float(0.25f);
  const Tensor x = Tensor::from_vector<float>({3, 1}, {1, 2, 6});
  const Tensor dy = Tensor::from_vector<float>({3, 1}, {1, 0, 2});
  const Tensor scale = Tensor::from_vector<float>({1}, {2});
  const std::vector<Tensor> out = run_node(n, {x, dy, scale}, 1, kRewriteDomain);
  const double inv = 1 / std::sqrt(14.0 / 3 + 0.25);
  ASSERT_EQ(out[1].shape(), (Shape{1, 1}));
  ASSERT_EQ(out[2].shape(), (Shape{1, 1}));
  EXPECT_NEAR(out[1].data<float>()[0], 4 * inv, 1e-6);
  EXPECT_EQ(out[2].data<float>()[0], 3.0f);
  const double d[] = {-2, -1, 3}, g[] = {1, 0, 2};
  for (int k = 0; k < 3; ++k)
    EXPECT_NEAR(out[0].data<float>()[k], 2 * inv * (g[k] - 1 - 4 * d[k] * inv * inv / 3), 1e-6)
        << "element " << k;
}

TEST(BatchNormTrainingGrad, AnEmptyBatchGivesZeroSums) {
  const Tensor x = Tensor::zeros({0, 3, 4, 4}, DType::Float32);
  const Tensor scale = Tensor::from_vector<float>({3}, {1, 2, 3});
  const std::vector<Tensor> out = run_node(grad_node(), {x, x, scale}, 1, kRewriteDomain);
  EXPECT_EQ(out[0].shape(), (Shape{0, 3, 4, 4}));
  ASSERT_EQ(out[1].shape(), (Shape{1, 3, 1, 1}));
  ASSERT_EQ(out[2].shape(), (Shape{1, 3, 1, 1}));
  for (int64_t c = 0; c < 3; ++c) {
    EXPECT_EQ(out[1].data<float>()[c], 0.0f);
    EXPECT_EQ(out[2].data<float>()[c], 0.0f);
  }
}

TEST(BatchNormTrainingGrad, NamesWhatDoesNotFit) {
  const Tensor x = to_float32(random_tensor({2, 3, 4}, -1, 1, 1));
  const Tensor scale = Tensor::from_vector<float>({3}, {1, 2, 3});
  EXPECT_EQ(run_node_error(grad_node(), {x, random_tensor({2, 3, 4}, -1, 1, 2), scale}, 1,
                           kRewriteDomain),
            "[BatchNormTrainingGrad] node 'bn_grad': X, dY and scale must be float32, got "
            "float32, float64 and float32");
  EXPECT_EQ(run_node_error(grad_node(), {x, to_float32(random_tensor({2, 3, 5}, -1, 1, 2)), scale},
                           1, kRewriteDomain),
            "[BatchNormTrainingGrad] node 'bn_grad': dY [2, 3, 5] must have the shape of X "
            "[2, 3, 4]");
  EXPECT_EQ(run_node_error(grad_node(), {x, x, Tensor::from_vector<float>({2}, {1, 2})}, 1,
                           kRewriteDomain),
            "[BatchNormTrainingGrad] node 'bn_grad': scale [2] must have shape [3]");
  const Tensor flat = Tensor::from_vector<float>({3}, {1, 2, 3});
  EXPECT_EQ(run_node_error(grad_node(), {flat, flat, scale}, 1, kRewriteDomain),
            "[BatchNormTrainingGrad] node 'bn_grad': X must have rank >= 2, got 1");
}

}  // namespace
}  // namespace dprun
