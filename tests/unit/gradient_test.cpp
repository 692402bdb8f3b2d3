// Gradient graphs: every registered rule against central finite differences in float64 (the
// cases live in gradient_*_test.cpp), plus the builder's behaviour and the Gradient op.
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <random>
#include <set>

#include "engine/autograd/gradient_registry.h"
#include "gradient_check.h"

namespace dprun {
namespace {

using namespace dprun::testing;

// ---- builder behaviour ----

TEST(GradientBuilder, HandComputedChain) {
  // y = (a + b) * a: dy/da = 2a + b, dy/db = a (the conformance test_gradient_of_add_and_mul).
  auto g = make_graph({node("Add", {"a", "b"}, {"c"}), node("Mul", {"c", "a"}, {"y"})},
                      {{"a", Tensor::scalar<double>(1)}, {"b", Tensor::scalar<double>(2)}}, "y", 12,
                      Decl::Full);
  g->value_types["c"] = {DType::Float64, SymbolicShape{}};
  g->outputs[0].type = {DType::Float64, SymbolicShape{}};
  GradientSpec spec{{"a", "b"}, "y"};
  auto r = build_gradient(*g, spec);
  for (const auto& n : r.nodes) {
    EXPECT_EQ(n.domain, "");
    EXPECT_EQ(n.name.rfind("grad/", 0), 0u) << n.name;
  }
  g->nodes.insert(g->nodes.end(), r.nodes.begin(), r.nodes.end());
  g->outputs = {{r.gradients[0], {}}, {r.gradients[1], {}}};
  Model m(g, Device::cpu());
  auto out = m.run(std::vector<Tensor>{Tensor::scalar<double>(1), Tensor::scalar<double>(2)});
  EXPECT_DOUBLE_EQ(out[0].item_as_double(), 4.0);
  EXPECT_DOUBLE_EQ(out[1].item_as_double(), 1.0);
}

TEST(GradientBuilder, AccumulatesValueUsedTwice) {
  // y = x * x + exp(x): dy/dx = 2x + exp(x); x feeds three uses.
  std::vector<Node> nodes = {node("Mul", {"x", "x"}, {"sq"}), node("Exp", {"x"}, {"e"}),
                             node("Add", {"sq", "e"}, {"y"})};
  check_all_ways(nodes, {in("x", {2, 2}, 4)}, "y", {"x"});
  GradientResult r;
  training_graph(*make_graph(nodes, {in("x", {2, 2}, 4)}, "y", 17, Decl::Full), {"x"}, &r);
  int sums = 0;
  for (const auto& n : r.nodes)
    if (n.op_type == "Sum") {
      ++sums;
      EXPECT_EQ(n.inputs.size(), 3u);
    }
  EXPECT_EQ(sums, 1);
}

TEST(GradientBuilder, BroadcastReductionValues) {
  // y = a + b with a [2, 3], b [3], dY = ones: db = [2, 2, 2].
  for (Decl decl : {Decl::Full, Decl::None}) {
    auto g = make_graph({node("Add", {"a", "b"}, {"y"})}, {in("a", {2, 3}, 1), in("b", {3}, 2)},
                        "y", 17, decl);
    if (decl == Decl::Full)
      g->outputs[0].type = {DType::Float64, SymbolicShape{Dim::known(2), Dim::known(3)}};
    GradientSpec spec{{"b"}, "y"};
    auto r = build_gradient(*g, spec);
    g->nodes.insert(g->nodes.end(), r.nodes.begin(), r.nodes.end());
    g->outputs = {{r.gradients[0], {}}};
    Model m(g, Device::cpu());
    auto out =
        m.run(std::vector<Tensor>{random_tensor({2, 3}, -1, 1, 1), random_tensor({3}, -1, 1, 2)});
    ASSERT_EQ(out[0].shape(), (Shape{3}));
    for (int i = 0; i < 3; ++i) EXPECT_DOUBLE_EQ(out[0].item_as_double(i), 2.0);
  }
}

TEST(GradientBuilder, SkipsBranchesThatDoNotReachY) {
  // z = Hardmax(w) leads nowhere (and Hardmax has no rule); y = x * 2.
  auto g = make_graph({node("Hardmax", {"w"}, {"z"}), node("Mul", {"x", "two"}, {"y"})},
                      {in("x", {3}, 1), in("w", {3}, 2), {"two", Tensor::scalar<double>(2), true}},
                      "y", 17, Decl::Full);
  g->outputs.push_back({"z", {}});
  GradientSpec spec{{"x", "w"}, "y"};
  auto r = build_gradient(*g, spec);
  for (const auto& n : r.nodes) EXPECT_NE(n.op_type, "Hardmax");
  g->nodes.insert(g->nodes.end(), r.nodes.begin(), r.nodes.end());
  g->outputs = {{r.gradients[0], {}}, {r.gradients[1], {}}};
  Model m(g, Device::cpu());
  auto out = m.run(std::vector<Tensor>{random_tensor({3}, -1, 1, 1), random_tensor({3}, -1, 1, 2)});
  for (int i = 0; i < 3; ++i) {
    EXPECT_DOUBLE_EQ(out[0].item_as_double(i), 2.0);
    EXPECT_DOUBLE_EQ(out[1].item_as_double(i), 0.0);  // zeros for the unreachable x
  }
  spec.zeros_for_unreachable = false;
  EXPECT_TRUE(build_gradient(*g, spec).gradients[1].empty());
}

TEST(GradientBuilder, CutsPathsAtOtherXs) {
  // y = exp(h), h = 3 * x: with both as xs, dy/dx is taken with h held fixed (zero).
  auto g = make_graph({node("Mul", {"x", "three"}, {"h"}), node("Exp", {"h"}, {"y"})},
                      {in("x", {2}, 1), {"three", Tensor::scalar<double>(3), true}}, "y", 17,
                      Decl::None);
  GradientSpec spec{{"h", "x"}, "y"};
  spec.zeros_for_unreachable = false;
  auto r = build_gradient(*g, spec);
  EXPECT_FALSE(r.gradients[0].empty());
  EXPECT_TRUE(r.gradients[1].empty());
}

TEST(GradientBuilder, Errors) {
  auto g = make_graph({node("Hardmax", {"x"}, {"y"})}, {in("x", {3}, 1)}, "y", 17, Decl::Full);
  EXPECT_THROW(build_gradient(*g, GradientSpec{{"x"}, "y"}), Error);  // no rule for Hardmax
  EXPECT_THROW(build_gradient(*g, GradientSpec{{"x"}, "nope"}), Error);
  EXPECT_THROW(build_gradient(*g, GradientSpec{{"nope"}, "y"}), Error);
  // Unknown shapes at opset 12 cannot be unbroadcast.
  auto add = make_graph({node("Add", {"a", "b"}, {"y"})}, {in("a", {2, 3}, 1), in("b", {3}, 2)},
                        "y", 12, Decl::None);
  EXPECT_THROW(build_gradient(*add, GradientSpec{{"a", "b"}, "y"}), Error);
  // MatMul needs ranks.
  auto mm = make_graph({node("MatMul", {"a", "b"}, {"y"})},
                       {in("a", {2, 3}, 1), in("b", {3, 2}, 2)}, "y", 17, Decl::None);
  EXPECT_THROW(build_gradient(*mm, GradientSpec{{"a"}, "y"}), Error);
}

// Every registered rule, straight from the registry: a rule without a finite-difference
// case fails here.
class EveryGradientRule : public ::testing::TestWithParam<std::string> {};

std::vector<std::string> registered_rule_ops() {
  std::set<std::string> ops;
  for (const auto& def : GradientRegistry::instance().definitions())
    ops.insert((def.domain.empty() ? "" : def.domain + ".") + def.op_type);
  return {ops.begin(), ops.end()};
}

TEST_P(EveryGradientRule, MatchesFiniteDifferences) {
  const auto& cases = gradient_cases();
  auto it = cases.find(GetParam());
  ASSERT_NE(it, cases.end()) << "the gradient rule for " << GetParam()
                             << " has no DPRUN_GRADIENT_CASE";
  for (const auto& [name, run] : it->second) {
    SCOPED_TRACE(name);
    run();
  }
}

INSTANTIATE_TEST_SUITE_P(Registry, EveryGradientRule, ::testing::ValuesIn(registered_rule_ops()),
                         [](const auto& info) {
                           std::string name = info.param;
                           for (char& c : name)
                             if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
                           return name;
                         });

TEST(GradientRegistry, EveryCaseNamesARegisteredRule) {
  std::vector<std::string> ops = registered_rule_ops();
  for (const auto& [op, cases] : gradient_cases())
    EXPECT_NE(std::find(ops.begin(), ops.end(), op), ops.end())
        << "case " << cases.front().first << " tests " << op << ", which has no rule";
}

TEST(GradientRegistry, Lookup) {
  auto& reg = GradientRegistry::instance();
  EXPECT_NE(reg.find("", "Cast", 17), nullptr);
  EXPECT_EQ(reg.find("", "Hardmax", 17), nullptr);
  EXPECT_EQ(reg.find("", "Cast", 5), nullptr);  // Cast's rule starts at opset 6
}

// ---- the Gradient op ----

std::shared_ptr<Graph> gradient_op_graph(std::vector<std::string> zs) {
  auto g = std::make_shared<Graph>();
  g->name = "with_gradient";
  g->opset_imports[""] = 12;
  g->opset_imports["ai.onnx.preview.training"] = 1;
  for (const char* name : {"a", "b"})
    g->inputs.push_back({name, {DType::Float32, SymbolicShape{}}});
  g->nodes.push_back(node("Add", {"a", "b"}, {"c"}));
  g->nodes.push_back(node("Mul", {"c", "a"}, {"d"}));
  Node grad = make_node("Gradient", {"a", "b"}, {"dd_da"});
  grad.domain = "ai.onnx.preview.training";
  Attribute xs;
  xs.kind = Attribute::Kind::Strings;
  xs.strings = {"a"};
  Attribute zs_attr = xs;
  zs_attr.strings = zs;
  Attribute y;
  y.kind = Attribute::Kind::String;
  y.s = "d";
  grad.attributes = {{"xs", xs}, {"zs", zs_attr}, {"y", y}};
  if (zs.empty()) {
    grad.inputs = {"a"};
    grad.attributes.erase("zs");
  }
  g->nodes.push_back(grad);
  g->outputs = {{"d", {}}, {"dd_da", {}}};
  // As shape inference would declare them: opset 12 needs static shapes to unbroadcast.
  g->value_types["c"] = {DType::Float32, SymbolicShape{}};
  g->value_types["d"] = {DType::Float32, SymbolicShape{}};
  return g;
}

TEST(GradientOp, WithZs) {
  Model m(gradient_op_graph({"b"}), Device::cpu());
  auto out = m.run(std::vector<Tensor>{Tensor::scalar<float>(1), Tensor::scalar<float>(2)});
  EXPECT_FLOAT_EQ(out[0].item_as_double(), 3.0);
  EXPECT_FLOAT_EQ(out[1].item_as_double(), 4.0);  // 2a + b
}

TEST(GradientOp, MissingZsFails) {
  // y depends on b, which is neither an x nor a z.
  EXPECT_THROW(Model(gradient_op_graph({}), Device::cpu()), Error);
}

}  // namespace
}  // namespace dprun
