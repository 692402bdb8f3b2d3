// Gradient graphs: every rule against central finite differences in float64, plus
// hand-computed cases, accumulation, broadcasting, unreachable branches and the Gradient op.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "engine/autograd/gradient_builder.h"
#include "op_test_util.h"

namespace dprun {
namespace {

using testing::float_attr;
using testing::int_attr;
using testing::ints_attr;
using testing::make_node;

// How the forward graph declares its values, which decides whether the builder reduces
// broadcast axes with static axes or with the run-time composition.
enum class Decl {
  Full,      // concrete shapes on inputs and y
  Symbolic,  // ranks only: every dim a distinct symbol
  None,      // dtypes only
};

struct Input {
  std::string name;
  Tensor value;
  bool constant = false;  // an initializer rather than a fed input
};

Tensor random_tensor(const Shape& shape, double lo, double hi, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> dist(lo, hi);
  std::vector<double> v(static_cast<size_t>(shape_numel(shape)));
  for (auto& x : v) x = dist(rng);
  return Tensor::from_vector<double>(shape, v);
}

SymbolicShape declare(const Shape& shape, Decl decl, int& symbol) {
  SymbolicShape s;
  for (int64_t d : shape) {
    if (decl == Decl::Full) {
      s.push_back(Dim::known(d));
    } else {
      std::string name = "s";
      name += std::to_string(symbol++);
      s.push_back(Dim::named(name));
    }
  }
  return s;
}

std::shared_ptr<Graph> make_graph(const std::vector<Node>& nodes, const std::vector<Input>& inputs,
                                  const std::string& y, int64_t opset, Decl decl) {
  auto g = std::make_shared<Graph>();
  g->name = "forward";
  g->opset_imports[""] = opset;
  int symbol = 0;
  for (const auto& in : inputs) {
    if (in.constant) {
      g->initializers[in.name] = in.value;
      continue;
    }
    TensorType t{in.value.dtype(), std::nullopt};
    if (decl != Decl::None) t.shape = declare(in.value.shape(), decl, symbol);
    g->inputs.push_back({in.name, t});
  }
  g->nodes = nodes;
  g->outputs.push_back({y, {}});
  return g;
}

std::vector<Tensor> feeds_of(const std::vector<Input>& inputs) {
  std::vector<Tensor> feeds;
  for (const auto& in : inputs)
    if (!in.constant) feeds.push_back(in.value);
  return feeds;
}

Tensor run_forward(std::shared_ptr<Graph> g, const std::vector<Tensor>& feeds) {
  Model model(g, Device::cpu());
  return model.run(feeds)[0];
}

// Forward graph + input dY + backward nodes; outputs the gradients of `xs`.
std::shared_ptr<Graph> training_graph(const Graph& forward, const std::vector<std::string>& xs,
                                      GradientResult* out = nullptr) {
  auto g = std::make_shared<Graph>(forward);
  GradientSpec spec;
  spec.xs = xs;
  spec.y = forward.outputs[0].name;
  spec.dy = "dY";
  GradientResult r = build_gradient(forward, spec);
  g->inputs.push_back({"dY", {DType::Float64, std::nullopt}});
  for (const auto& n : r.nodes) g->nodes.push_back(n);
  g->outputs.clear();
  for (const auto& name : r.gradients) g->outputs.push_back({name, {}});
  if (out) *out = r;
  return g;
}

double weighted_sum(const Tensor& y, const Tensor& w) {
  double s = 0;
  for (int64_t i = 0; i < y.numel(); ++i) s += y.item_as_double(i) * w.item_as_double(i);
  return s;
}

// Compares dL/dx for L = sum(y * dY) (dY random) with central differences, for every x in
// `xs` (names of fed inputs).
void check_gradients(const std::vector<Node>& nodes, std::vector<Input> inputs,
                     const std::string& y, const std::vector<std::string>& xs, int64_t opset = 17,
                     Decl decl = Decl::Full, double tol = 1e-6) {
  SCOPED_TRACE("opset " + std::to_string(opset) + " decl " + std::to_string(int(decl)));
  auto forward = make_graph(nodes, inputs, y, opset, decl);
  Tensor y0 = run_forward(forward, feeds_of(inputs));
  if (decl != Decl::None) {  // declare y as shape inference would have
    int symbol = 100;
    forward->outputs[0].type = {y0.dtype(), declare(y0.shape(), decl, symbol)};
  }
  Tensor dy = random_tensor(y0.shape(), -1, 1, 7);
  auto train = training_graph(*forward, xs);
  Model model(train, Device::cpu());
  std::vector<Tensor> feeds = feeds_of(inputs);
  feeds.push_back(dy);
  std::vector<Tensor> grads = model.run(feeds);
  ASSERT_EQ(grads.size(), xs.size());

  const double h = 1e-6;
  for (size_t k = 0; k < xs.size(); ++k) {
    size_t idx = 0;
    while (idx < inputs.size() && inputs[idx].name != xs[k]) ++idx;
    ASSERT_LT(idx, inputs.size());
    const Tensor x0 = inputs[idx].value;
    ASSERT_EQ(grads[k].shape(), x0.shape()) << "gradient of " << xs[k];
    for (int64_t j = 0; j < x0.numel(); ++j) {
      auto at = [&](double delta) {
        std::vector<Input> shifted = inputs;
        Tensor x = x0.clone();
        x.data<double>()[j] += delta;
        shifted[idx].value = x;
        return weighted_sum(
            run_forward(make_graph(nodes, shifted, y, opset, Decl::None), feeds_of(shifted)), dy);
      };
      double numeric = (at(h) - at(-h)) / (2 * h);
      double analytic = grads[k].item_as_double(j);
      EXPECT_NEAR(analytic, numeric, tol * std::max(1.0, std::abs(numeric)))
          << "d/d" << xs[k] << "[" << j << "]";
    }
  }
}

// The same check at opset 12 (static axes) and opset 17 under each declaration style.
void check_all_ways(const std::vector<Node>& nodes, const std::vector<Input>& inputs,
                    const std::string& y, const std::vector<std::string>& xs,
                    bool needs_rank = false) {
  check_gradients(nodes, inputs, y, xs, 12, Decl::Full);
  check_gradients(nodes, inputs, y, xs, 17, Decl::Full);
  check_gradients(nodes, inputs, y, xs, 17, Decl::Symbolic);
  if (!needs_rank) check_gradients(nodes, inputs, y, xs, 17, Decl::None);
}

Input in(const std::string& name, const Shape& shape, uint32_t seed, double lo = -1,
         double hi = 1) {
  return {name, random_tensor(shape, lo, hi, seed)};
}

Node node(const std::string& op, std::vector<std::string> ins, std::vector<std::string> outs,
          std::map<std::string, Attribute> attrs = {}) {
  Node n = make_node(op, std::move(ins), std::move(outs));
  n.name = op + "_fwd";
  n.attributes = std::move(attrs);
  return n;
}

// ---- binary arithmetic with broadcasting ----

TEST(GradientRules, AddSameShape) {
  check_all_ways({node("Add", {"a", "b"}, {"y"})}, {in("a", {2, 3}, 1), in("b", {2, 3}, 2)}, "y",
                 {"a", "b"});
}

TEST(GradientRules, AddBroadcast) {
  check_all_ways({node("Add", {"a", "b"}, {"y"})}, {in("a", {2, 1, 4}, 1), in("b", {3, 1}, 2)}, "y",
                 {"a", "b"});
  check_all_ways({node("Add", {"a", "b"}, {"y"})}, {in("a", {2, 3}, 1), in("b", {}, 2)}, "y",
                 {"a", "b"});
}

TEST(GradientRules, SubBroadcast) {
  check_all_ways({node("Sub", {"a", "b"}, {"y"})}, {in("a", {2, 3}, 1), in("b", {3}, 2)}, "y",
                 {"a", "b"});
}

TEST(GradientRules, MulBroadcast) {
  check_all_ways({node("Mul", {"a", "b"}, {"y"})}, {in("a", {4, 1}, 3), in("b", {2, 1, 3}, 4)}, "y",
                 {"a", "b"});
}

TEST(GradientRules, DivBroadcast) {
  check_all_ways({node("Div", {"a", "b"}, {"y"})},
                 {in("a", {2, 3}, 5), in("b", {1, 3}, 6, 0.5, 2.0)}, "y", {"a", "b"});
}

TEST(GradientRules, PowConstantExponent) {
  Input e{"e", Tensor::scalar<double>(3.0), true};
  check_all_ways({node("Pow", {"x", "e"}, {"y"})}, {in("x", {2, 3}, 7), e}, "y", {"x"});
}

TEST(GradientRules, PowBothInputs) {
  check_all_ways({node("Pow", {"x", "e"}, {"y"})},
                 {in("x", {2, 3}, 7, 0.5, 2.0), in("e", {3}, 8, -1.5, 2.5)}, "y", {"x", "e"});
}

// ---- unary ----

TEST(GradientRules, Unary) {
  for (const char* op : {"Neg", "Relu", "Sigmoid", "Tanh", "Exp", "Identity"}) {
    SCOPED_TRACE(op);
    check_all_ways({node(op, {"x"}, {"y"})}, {in("x", {3, 4}, 9)}, "y", {"x"});
  }
  for (const char* op : {"Log", "Sqrt"}) {
    SCOPED_TRACE(op);
    check_all_ways({node(op, {"x"}, {"y"})}, {in("x", {3, 4}, 9, 0.2, 3.0)}, "y", {"x"});
  }
}

TEST(GradientRules, ReluHandComputed) {
  auto g = make_graph({node("Relu", {"x"}, {"y"})},
                      {{"x", Tensor::from_vector<double>({4}, {-2, -0.5, 0.5, 3})}}, "y", 17,
                      Decl::Full);
  auto train = training_graph(*g, {"x"});
  Model m(train, Device::cpu());
  auto out = m.run(std::vector<Tensor>{Tensor::from_vector<double>({4}, {-2, -0.5, 0.5, 3}),
                                       Tensor::from_vector<double>({4}, {10, 20, 30, 40})});
  std::vector<double> expect = {0, 0, 30, 40};
  for (int i = 0; i < 4; ++i) EXPECT_EQ(out[0].item_as_double(i), expect[static_cast<size_t>(i)]);
}

// ---- matrix products ----

TEST(GradientRules, MatMul2D) {
  check_all_ways({node("MatMul", {"a", "b"}, {"y"})}, {in("a", {3, 4}, 1), in("b", {4, 2}, 2)}, "y",
                 {"a", "b"}, true);
}

TEST(GradientRules, MatMulBatchedBroadcast) {
  check_all_ways({node("MatMul", {"a", "b"}, {"y"})},
                 {in("a", {2, 1, 3, 4}, 1), in("b", {3, 4, 2}, 2)}, "y", {"a", "b"}, true);
  check_all_ways({node("MatMul", {"a", "b"}, {"y"})}, {in("a", {2, 3, 4}, 1), in("b", {4, 5}, 2)},
                 "y", {"a", "b"}, true);
}

TEST(GradientRules, MatMulVectors) {
  check_all_ways({node("MatMul", {"a", "b"}, {"y"})}, {in("a", {4}, 1), in("b", {2, 4, 3}, 2)}, "y",
                 {"a", "b"}, true);
  check_all_ways({node("MatMul", {"a", "b"}, {"y"})}, {in("a", {2, 3, 4}, 1), in("b", {4}, 2)}, "y",
                 {"a", "b"}, true);
  check_all_ways({node("MatMul", {"a", "b"}, {"y"})}, {in("a", {4}, 1), in("b", {4}, 2)}, "y",
                 {"a", "b"}, true);
}

TEST(GradientRules, Gemm) {
  for (int ta = 0; ta < 2; ++ta)
    for (int tb = 0; tb < 2; ++tb) {
      SCOPED_TRACE("transA " + std::to_string(ta) + " transB " + std::to_string(tb));
      Shape sa = ta ? Shape{4, 3} : Shape{3, 4};
      Shape sb = tb ? Shape{2, 4} : Shape{4, 2};
      auto n = node("Gemm", {"a", "b", "c"}, {"y"},
                    {{"transA", int_attr(ta)},
                     {"transB", int_attr(tb)},
                     {"alpha", float_attr(0.5f)},
                     {"beta", float_attr(2.0f)}});
      check_all_ways({n}, {in("a", sa, 1), in("b", sb, 2), in("c", {2}, 3)}, "y", {"a", "b", "c"});
      check_gradients({n}, {in("a", sa, 1), in("b", sb, 2), in("c", {3, 1}, 3)}, "y",
                      {"a", "b", "c"}, 17, Decl::Symbolic);
    }
  // Without C.
  check_all_ways({node("Gemm", {"a", "b"}, {"y"})}, {in("a", {3, 4}, 1), in("b", {4, 2}, 2)}, "y",
                 {"a", "b"});
}

// ---- shape and data movement ----

TEST(GradientRules, Reshape) {
  Input shape{"shape", Tensor::from_vector<int64_t>({2}, {4, -1}), true};
  check_all_ways({node("Reshape", {"x", "shape"}, {"y"})}, {in("x", {2, 3, 2}, 1), shape}, "y",
                 {"x"});
}

TEST(GradientRules, Transpose) {
  check_all_ways({node("Transpose", {"x"}, {"y"}, {{"perm", ints_attr({1, 2, 0})}})},
                 {in("x", {2, 3, 4}, 1)}, "y", {"x"});
  check_all_ways({node("Transpose", {"x"}, {"y"})}, {in("x", {2, 3, 4}, 1)}, "y", {"x"});
}

TEST(GradientRules, Flatten) {
  check_all_ways({node("Flatten", {"x"}, {"y"}, {{"axis", int_attr(2)}})}, {in("x", {2, 3, 4}, 1)},
                 "y", {"x"});
}

TEST(GradientRules, Concat) {
  check_all_ways({node("Concat", {"a", "b", "c"}, {"y"}, {{"axis", int_attr(-1)}})},
                 {in("a", {2, 1}, 1), in("b", {2, 3}, 2), in("c", {2, 2}, 3)}, "y",
                 {"a", "b", "c"});
  check_gradients({node("Concat", {"a", "b"}, {"y"}, {{"axis", int_attr(0)}})},
                  {in("a", {2, 2}, 1), in("b", {1, 2}, 2)}, "y", {"a", "b"}, 9, Decl::Full);
}

TEST(GradientRules, CastBetweenFloatTypes) {
  // float32 -> float64: the gradient comes back as float32.
  auto g = std::make_shared<Graph>();
  g->opset_imports[""] = 17;
  g->inputs.push_back({"x", {DType::Float32, std::nullopt}});
  g->inputs.push_back({"dY", {DType::Float64, std::nullopt}});
  g->nodes.push_back(node("Cast", {"x"}, {"y"}, {{"to", int_attr(int64_t(DType::Float64))}}));
  g->outputs.push_back({"y", {}});
  GradientSpec spec{{"x"}, "y", "dY"};
  auto r = build_gradient(*g, spec);
  for (const auto& n : r.nodes) g->nodes.push_back(n);
  g->outputs = {{r.gradients[0], {}}};
  Model m(g, Device::cpu());
  auto out = m.run(std::vector<Tensor>{Tensor::from_vector<float>({2}, {1, 2}),
                                       Tensor::from_vector<double>({2}, {0.25, -3})});
  ASSERT_EQ(out[0].dtype(), DType::Float32);
  EXPECT_EQ(out[0].data<float>()[0], 0.25f);
  EXPECT_EQ(out[0].data<float>()[1], -3.0f);
}

// ---- reductions and softmax ----

TEST(GradientRules, ReduceSum) {
  for (int keep = 0; keep < 2; ++keep) {
    SCOPED_TRACE("keepdims " + std::to_string(keep));
    Input axes{"axes", Tensor::from_vector<int64_t>({2}, {-1, 0}), true};
    for (Decl decl : {Decl::Full, Decl::Symbolic})
      check_gradients({node("ReduceSum", {"x", "axes"}, {"y"}, {{"keepdims", int_attr(keep)}})},
                      {in("x", {2, 3, 4}, 1), axes}, "y", {"x"}, 17, decl);
    // Opset 11: axes attribute.
    check_gradients(
        {node("ReduceSum", {"x"}, {"y"}, {{"keepdims", int_attr(keep)}, {"axes", ints_attr({1})}})},
        {in("x", {2, 3, 4}, 1)}, "y", {"x"}, 11);
    // Every axis.
    check_gradients({node("ReduceSum", {"x"}, {"y"}, {{"keepdims", int_attr(keep)}})},
                    {in("x", {2, 3}, 1)}, "y", {"x"}, 17, Decl::None);
    // Axes fed at run time.
    check_gradients({node("ReduceSum", {"x", "axes"}, {"y"}, {{"keepdims", int_attr(keep)}})},
                    {in("x", {2, 3, 4}, 1), {"axes", Tensor::from_vector<int64_t>({1}, {-2})}}, "y",
                    {"x"}, 17, Decl::None);
  }
}

TEST(GradientRules, ReduceMean) {
  for (int keep = 0; keep < 2; ++keep) {
    SCOPED_TRACE("keepdims " + std::to_string(keep));
    check_gradients({node("ReduceMean", {"x"}, {"y"},
                          {{"keepdims", int_attr(keep)}, {"axes", ints_attr({0, 2})}})},
                    {in("x", {2, 3, 4}, 1)}, "y", {"x"}, 17, Decl::Symbolic);
    check_gradients({node("ReduceMean", {"x"}, {"y"}, {{"keepdims", int_attr(keep)}})},
                    {in("x", {2, 3}, 1)}, "y", {"x"}, 12);
    Input axes{"axes", Tensor::from_vector<int64_t>({1}, {1}), true};
    check_gradients({node("ReduceMean", {"x", "axes"}, {"y"}, {{"keepdims", int_attr(keep)}})},
                    {in("x", {2, 3, 4}, 1), axes}, "y", {"x"}, 18, Decl::Full);
  }
}

TEST(GradientRules, SoftmaxFamily) {
  for (const char* op : {"Softmax", "LogSoftmax"}) {
    SCOPED_TRACE(op);
    // Opset 13: one axis.
    check_gradients({node(op, {"x"}, {"y"}, {{"axis", int_attr(1)}})}, {in("x", {2, 3, 4}, 1)}, "y",
                    {"x"}, 13, Decl::None);
    check_gradients({node(op, {"x"}, {"y"})}, {in("x", {2, 3, 4}, 1)}, "y", {"x"}, 17, Decl::Full);
    // Opset 11: coerced to 2-D at axis.
    check_gradients({node(op, {"x"}, {"y"}, {{"axis", int_attr(1)}})}, {in("x", {2, 3, 4}, 1)}, "y",
                    {"x"}, 11, Decl::Full);
    check_gradients({node(op, {"x"}, {"y"})}, {in("x", {2, 3, 4}, 1)}, "y", {"x"}, 11, Decl::Full);
  }
}

TEST(GradientRules, Conv) {
  // 2-D with stride, asymmetric pads and dilation; the stride leaves input rows unused.
  auto n = node("Conv", {"x", "w", "b"}, {"y"},
                {{"strides", ints_attr({2, 1})},
                 {"pads", ints_attr({1, 0, 0, 1})},
                 {"dilations", ints_attr({1, 2})}});
  check_gradients({n}, {in("x", {1, 2, 6, 5}, 1), in("w", {3, 2, 3, 2}, 2), in("b", {3}, 3)}, "y",
                  {"x", "w", "b"}, 17, Decl::Full);
  check_gradients({n}, {in("x", {1, 2, 6, 5}, 1), in("w", {3, 2, 3, 2}, 2), in("b", {3}, 3)}, "y",
                  {"x", "w", "b"}, 9, Decl::Full);
  // 1-D.
  check_gradients({node("Conv", {"x", "w"}, {"y"}, {{"strides", ints_attr({3})}})},
                  {in("x", {1, 2, 8}, 1), in("w", {3, 2, 2}, 2)}, "y", {"x", "w"}, 17, Decl::Full);
  // Grouped: input gradient only.
  check_gradients({node("Conv", {"x", "w"}, {"y"}, {{"group", int_attr(2)}})},
                  {in("x", {1, 4, 4, 4}, 1), in("w", {4, 2, 3, 3}, 2)}, "y", {"x"}, 17, Decl::Full);
}

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
  // z = Sin(w) leads nowhere (and Sin has no rule); y = x * 2.
  auto g = make_graph({node("Sin", {"w"}, {"z"}), node("Mul", {"x", "two"}, {"y"})},
                      {in("x", {3}, 1), in("w", {3}, 2), {"two", Tensor::scalar<double>(2), true}},
                      "y", 17, Decl::Full);
  g->outputs.push_back({"z", {}});
  GradientSpec spec{{"x", "w"}, "y"};
  auto r = build_gradient(*g, spec);
  for (const auto& n : r.nodes) EXPECT_NE(n.op_type, "Sin");
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
  auto g = make_graph({node("Sin", {"x"}, {"y"})}, {in("x", {3}, 1)}, "y", 17, Decl::Full);
  EXPECT_THROW(build_gradient(*g, GradientSpec{{"x"}, "y"}), Error);  // no rule for Sin
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

TEST(GradientRegistry, RulesAreRegistered) {
  auto& reg = GradientRegistry::instance();
  for (const char* op :
       {"Add",        "Sub",     "Mul",       "Div",     "Neg",       "MatMul",     "Gemm",
        "Relu",       "Sigmoid", "Tanh",      "Exp",     "Log",       "Sqrt",       "Pow",
        "Identity",   "Reshape", "Transpose", "Flatten", "ReduceSum", "ReduceMean", "Softmax",
        "LogSoftmax", "Concat",  "Cast",      "Conv"})
    EXPECT_NE(reg.find("", op, 17), nullptr) << op;
  EXPECT_EQ(reg.find("", "Sin", 17), nullptr);
  EXPECT_EQ(reg.find("", "Cast", 5), nullptr);
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
