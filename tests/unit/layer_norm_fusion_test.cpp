// Layer normalization as exporters write it before opset 17 (engine/rewrites/layer_norm_fusion.h):
// which chains run as one LayerNormalization node, their values against the unfused chain's, and
// the gradient builder's use of LayerNormalization's rule for them, checked by finite differences
// and against the chain's own rules.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "fusion_test_util.h"
#include "gradient_check.h"
#include "op_test_util.h"

namespace dprun {
namespace {

using namespace dprun::testing;

// One decomposed layer norm: X's shape, the normalized trailing axes as the ReduceMeans name
// them, the opset (which decides where they take their axes), and how the chain is written.
struct LnCase {
  std::string name;
  Shape x;
  std::vector<int64_t> axes;
  int64_t opset;
  bool pow_square = true;  // Pow(d, 2), else Mul(d, d)
  bool with_bias = true;   // the Add of B
  bool swapped = false;    // Mul(Scale, n) and Add(B, m)
  Decl decl = Decl::Full;
};

std::vector<LnCase> ln_cases() {
  return {
      {"ViT's export: opset 15, axes [-1], Pow", {2, 5, 8}, {-1}, 15},
      {"d * d, no B, operands swapped", {3, 6}, {-1}, 13, false, false, true},
      {"two axes, non-negative, opset 18 (axes as inputs)", {2, 3, 4, 5}, {2, 3}, 18},
      {"symbolic dims", {4, 7}, {-1}, 15, true, true, false, Decl::Symbolic},
  };
}

Shape normalized_shape(const LnCase& c) {
  return Shape(c.x.end() - static_cast<std::ptrdiff_t>(c.axes.size()), c.x.end());
}

std::vector<Input> ln_inputs(const LnCase& c) {
  std::vector<Input> inputs = {in("x", c.x, 1, -2, 3), in("scale", normalized_shape(c), 2, 0.5, 2)};
  if (c.with_bias) inputs.push_back(in("b", normalized_shape(c), 3));
  inputs.push_back({"eps", Tensor::scalar<double>(0.0009765625), true});  // 2^-10: float32 too
  inputs.push_back({"two", Tensor::scalar<double>(2.0), true});
  inputs.push_back(
      {"axes", Tensor::from_vector<int64_t>({static_cast<int64_t>(c.axes.size())}, c.axes), true});
  return inputs;
}

Node named(Node n, const std::string& name) {
  n.name = name;
  return n;
}

// The chain, in float64 (the constants too, as exporters write them in the model's type).
std::vector<Node> ln_chain(const LnCase& c) {
  auto reduce = [&](const std::string& in, const std::string& out) {
    if (c.opset >= 18) return named(node("ReduceMean", {in, "axes"}, {out}), out + "_node");
    return named(node("ReduceMean", {in}, {out}, {{"axes", Attribute::of_ints(c.axes)}}),
                 out + "_node");
  };
  std::vector<Node> nodes = {reduce("x", "mean"),
                             named(node("Sub", {"x", "mean"}, {"d"}), "sub"),
                             c.pow_square ? named(node("Pow", {"d", "two"}, {"sq"}), "pow")
                                          : named(node("Mul", {"d", "d"}, {"sq"}), "square"),
                             reduce("sq", "var"),
                             named(node("Add", {"var", "eps"}, {"vare"}), "add_eps"),
                             named(node("Sqrt", {"vare"}, {"std"}), "sqrt"),
                             named(node("Div", {"d", "std"}, {"n"}), "div"),
                             named(node("Mul",
                                        c.swapped ? std::vector<std::string>{"scale", "n"}
                                                  : std::vector<std::string>{"n", "scale"},
                                        {c.with_bias ? "m" : "y"}),
                                   "mul_scale")};
  if (c.with_bias)
    nodes.push_back(named(
        node("Add",
             c.swapped ? std::vector<std::string>{"b", "m"} : std::vector<std::string>{"m", "b"},
             {"y"}),
        "add_b"));
  return nodes;
}

std::shared_ptr<Graph> ln_graph(const LnCase& c, const std::vector<Node>& nodes) {
  return make_graph(nodes, ln_inputs(c), "y", c.opset, c.decl);
}

int fused_count(std::shared_ptr<Graph> g) {
  return count_ops(*compiled(std::move(g), true).plan()->graph_ptr(), "LayerNormalization");
}

TEST(DecomposedLayerNorm, RunsAsOneNodeWithTheChainsValues) {
  for (const LnCase& c : ln_cases()) {
    SCOPED_TRACE(c.name);
    auto g = ln_graph(c, ln_chain(c));
    Model fused = compiled(g, true);
    const Graph& plan = *fused.plan()->graph_ptr();
    EXPECT_EQ(count_ops(plan, "LayerNormalization"), 1);
    for (const char* op : {"ReduceMean", "Sub", "Pow", "Sqrt", "Div"})
      EXPECT_EQ(count_ops(plan, op), 0) << op;
    const std::vector<Tensor> feeds = feeds_of(ln_inputs(c));
    expect_near_in_scale(fused.run(feeds)[0], compiled(g, false).run(feeds)[0], 1e-13);
  }
}

TEST(DecomposedLayerNorm, LeavesAloneWhatLayerNormalizationDoesNotCompute) {
  const LnCase c = ln_cases()[0];
  auto changed = [&](auto edit) {
    std::vector<Node> nodes = ln_chain(c);
    auto g = ln_graph(c, nodes);
    edit(*g);
    return g;
  };
  auto find = [](Graph& g, const std::string& name) {
    return std::find_if(g.nodes.begin(), g.nodes.end(),
                        [&](const Node& n) { return n.name == name; });
  };
  EXPECT_EQ(fused_count(changed([](Graph&) {})), 1);
  // A value inside the chain is also a result.
  EXPECT_EQ(fused_count(changed([](Graph& g) { g.outputs.push_back({"mean", {}}); })), 0);
  // A leading axis: [0] is not a trailing one.
  EXPECT_EQ(fused_count(changed([&](Graph& g) {
              for (const char* r : {"mean_node", "var_node"})
                find(g, r)->attributes["axes"] = Attribute::of_ints({0});
            })),
            0);
  // The reductions over different axes.
  EXPECT_EQ(fused_count(changed([&](Graph& g) {
              find(g, "var_node")->attributes["axes"] = Attribute::of_ints({-2, -1});
            })),
            0);
  // Pow by 3.
  EXPECT_EQ(
      fused_count(changed([&](Graph& g) { g.initializers["two"] = Tensor::scalar<double>(3.0); })),
      0);
  // An epsilon read from a graph input.
  EXPECT_EQ(fused_count(changed([&](Graph& g) {
              find(g, "add_eps")->inputs[1] = "eps_in";
              g.inputs.push_back({"eps_in", {DType::Float64, SymbolicShape{}}});
            })),
            0);
  // A "scale" of X's rank: it broadcasts over the rows, which LayerNormalization's cannot.
  EXPECT_EQ(fused_count(changed([&](Graph& g) {
              for (auto& input : g.inputs)
                if (input.name == "scale")
                  input.type.shape = SymbolicShape{Dim::known(2), Dim::known(5), Dim::known(8)};
            })),
            0);
}

// The gradients of x, scale and b for dY, with and without the composite rule.
std::vector<Tensor> gradients(const LnCase& c, bool composites, GradientResult* result = nullptr) {
  auto forward = ln_graph(c, ln_chain(c));
  GradientSpec spec{{"x", "scale", "b"}, "y", "dY"};
  if (!c.with_bias) spec.xs.pop_back();
  spec.differentiate_composites = composites;
  GradientResult r = build_gradient(*forward, spec);
  auto g = std::make_shared<Graph>(*forward);
  g->inputs.push_back({"dY", {DType::Float64, std::nullopt}});
  g->nodes.insert(g->nodes.end(), r.nodes.begin(), r.nodes.end());
  g->outputs.clear();
  for (const std::string& name : r.gradients) g->outputs.push_back({name, {}});
  std::vector<Tensor> feeds = feeds_of(ln_inputs(c));
  feeds.push_back(random_tensor(c.x, -1, 1, 7));
  if (result) *result = r;
  return compiled(g, false).run(feeds);
}

int emitted(const GradientResult& r, const std::string& op) {
  return static_cast<int>(std::count_if(r.nodes.begin(), r.nodes.end(),
                                        [&](const Node& n) { return n.op_type == op; }));
}

TEST(DecomposedLayerNorm, IsDifferentiatedByLayerNormalizationsRule) {
  for (const LnCase& c : ln_cases()) {
    SCOPED_TRACE(c.name);
    GradientResult as_one, per_node;
    const std::vector<Tensor> got = gradients(c, true, &as_one);
    const std::vector<Tensor> want = gradients(c, false, &per_node);
    ASSERT_EQ(got.size(), want.size());
    for (size_t k = 0; k < want.size(); ++k) expect_near_in_scale(got[k], want[k], 1e-12);
    // The rule's own nodes: no Pow or Div rule ran, and fewer nodes were emitted.
    EXPECT_EQ(emitted(as_one, "Pow"), 0);
    EXPECT_EQ(emitted(as_one, "Div"), 0);
    EXPECT_GT(emitted(per_node, "Div"), 0);
    EXPECT_LT(as_one.nodes.size(), per_node.nodes.size());
  }
}

TEST(DecomposedLayerNorm, CompositeGradientMatchesFiniteDifferences) {
  for (const LnCase& c : ln_cases()) {
    SCOPED_TRACE(c.name);
    std::vector<std::string> xs = {"x", "scale"};
    if (c.with_bias) xs.push_back("b");
    check_gradients(ln_chain(c), ln_inputs(c), "y", xs, c.opset, c.decl);
  }
}

TEST(DecomposedLayerNorm, AGradientAskedForInsideTheChainKeepsEveryNodesRule) {
  const LnCase c = ln_cases()[0];
  auto forward = ln_graph(c, ln_chain(c));
  GradientResult r = build_gradient(*forward, GradientSpec{{"x", "d"}, "y", "dY"});
  ASSERT_EQ(r.gradients.size(), 2u);
  EXPECT_GT(emitted(r, "Div"), 0);  // Div's own rule gave d its gradient
  EXPECT_EQ(std::count_if(r.nodes.begin(), r.nodes.end(),
                          [&](const Node& n) { return n.outputs[0] == r.gradients[1]; }),
            1);
}

// LayerNormalization (X [rows..., D...] float32) and the gradients of `wrt` for a seed dY, the
// rule's backward pass as the CPU fuses it or not.
std::shared_ptr<Graph> ln17_gradient(const Shape& x, int64_t axis,
                                     const std::vector<std::string>& wrt, DType dtype) {
  const Shape p(x.begin() + (axis < 0 ? static_cast<int64_t>(x.size()) + axis : axis), x.end());
  std::vector<Input> inputs = {in("x", x, 1, -2, 3), in("scale", p, 2, 0.5, 2), in("b", p, 3)};
  for (Input& input : inputs)
    if (dtype == DType::Float32) input.value = to_float32(input.value);
  Node ln = node("LayerNormalization", {"x", "scale", "b"}, {"y"},
                 {{"axis", Attribute::of_int(axis)}, {"epsilon", Attribute::of_float(1e-3f)}});
  auto forward = make_graph({ln}, inputs, "y", 17, Decl::Full);
  return with_gradient(*forward, GradientSpec{wrt, "y", "dY"}, dtype);
}

std::vector<Tensor> ln17_feeds(const Shape& x, int64_t axis, DType dtype) {
  const Shape p(x.begin() + (axis < 0 ? static_cast<int64_t>(x.size()) + axis : axis), x.end());
  std::vector<Tensor> f = {random_tensor(x, -2, 3, 1), random_tensor(p, 0.5, 2, 2),
                           random_tensor(p, -1, 1, 3), random_tensor(x, -1, 1, 7)};
  if (dtype == DType::Float32)
    for (Tensor& t : f) t = to_float32(t);
  return f;
}

TEST(LayerNormGrad, TheRulesBackwardRunsAsOneNodeWithTheFloat64Values) {
  struct Case {
    Shape x;
    int64_t axis;
    std::vector<std::string> wrt;
    bool xhat_out;  // the scale's gradient reads xhat
  };
  for (const Case& c :
       {Case{{4, 5, 16}, -1, {"x", "scale", "b"}, true},
        Case{{3, 2, 4, 5}, 2, {"x", "scale", "b"}, true}, Case{{6, 8}, -1, {"x"}, false}}) {
    SCOPED_TRACE(shape_to_string(c.x) + " axis " + std::to_string(c.axis));
    const std::vector<Tensor> want =
        compiled(ln17_gradient(c.x, c.axis, c.wrt, DType::Float64), false)
            .run(ln17_feeds(c.x, c.axis, DType::Float64));
    Model fused = compiled(ln17_gradient(c.x, c.axis, c.wrt, DType::Float32), true);
    const Graph& plan = *fused.plan()->graph_ptr();
    EXPECT_EQ(count_ops(plan, "LayerNormGrad"), 1);
    EXPECT_EQ(count_ops(plan, "ReduceMean"), 0);
    EXPECT_EQ(count_ops(plan, "Reciprocal"), 0);
    const auto grad = std::find_if(plan.nodes.begin(), plan.nodes.end(),
                                   [](const Node& n) { return n.op_type == "LayerNormGrad"; });
    EXPECT_EQ(grad->outputs.size(), c.xhat_out ? 2u : 1u);
    const std::vector<Tensor> got = fused.run(ln17_feeds(c.x, c.axis, DType::Float32));
    ASSERT_EQ(got.size(), want.size());
    for (size_t k = 0; k < want.size(); ++k) expect_near_in_scale(got[k], want[k], 1e-5);
  }
}

TEST(LayerNormGrad, LeavesAloneWhatItDoesNotCompute) {
  // float64: the fused kernel is float32's.
  EXPECT_EQ(
      count_ops(
          *compiled(ln17_gradient({4, 8}, -1, {"x"}, DType::Float64), true).plan()->graph_ptr(),
          "LayerNormGrad"),
      0);
  // The recomputed mean is also a result.
  auto g = ln17_gradient({4, 8}, -1, {"x"}, DType::Float32);
  auto mean = std::find_if(g->nodes.begin(), g->nodes.end(), [](const Node& n) {
    return n.op_type == "ReduceMean" && n.inputs[0] == "x";
  });
  ASSERT_NE(mean, g->nodes.end());
  g->outputs.push_back({mean->outputs[0], {}});
  EXPECT_EQ(count_ops(*compiled(g, true).plan()->graph_ptr(), "LayerNormGrad"), 0);
}

}  // namespace
}  // namespace dprun
