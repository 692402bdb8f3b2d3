#pragma once
// Finite-difference checking of gradient rules, and the table of per-op cases.
//
// Every gradient rule registered in GradientRegistry must have at least one case, written in
// any tests/unit/gradient_*_test.cpp file with
//
//   DPRUN_GRADIENT_CASE(Relu, ReluOnRandomInput) { check_all_ways(...); }
//
// tests/unit/gradient_test.cpp runs every registered rule's cases and fails for a rule that
// has none.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "engine/autograd/gradient_builder.h"
#include "engine/model.h"
#include "op_test_util.h"

namespace dprun::testing {

/// Cases by forward op type, filled at static-initialisation time by DPRUN_GRADIENT_CASE.
inline std::map<std::string, std::vector<std::pair<std::string, std::function<void()>>>>&
gradient_cases() {
  static std::map<std::string, std::vector<std::pair<std::string, std::function<void()>>>> cases;
  return cases;
}

inline bool register_gradient_case(const std::string& op_type, const std::string& name,
                                   std::function<void()> fn) {
  gradient_cases()[op_type].emplace_back(name, std::move(fn));
  return true;
}

// How the forward graph declares its values, which decides whether the builder reduces
// broadcast axes with static axes or with the run-time composition.
enum class Decl {
  Full,      // concrete shapes on inputs and y
  Symbolic,  // ranks only: every dim a distinct symbol
  None,      // dtypes only
  Batch,     // as exported with a dynamic batch: dim 0 the symbol "batch", the others concrete
};

struct Input {
  std::string name;
  Tensor value;
  bool constant = false;  // an initializer rather than a fed input
};

inline Tensor random_tensor(const Shape& shape, double lo, double hi, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> dist(lo, hi);
  std::vector<double> v(static_cast<size_t>(shape_numel(shape)));
  for (auto& x : v) x = dist(rng);
  return Tensor::from_vector<double>(shape, v);
}

/// `t`'s values as float32.
inline Tensor to_float32(const Tensor& t) {
  std::vector<float> v;
  for (int64_t i = 0; i < t.numel(); ++i) v.push_back(static_cast<float>(t.item_as_double(i)));
  return Tensor::from_vector<float>(t.shape(), v);
}

/// The number of `op` nodes in `g` (of any domain).
inline int count_ops(const Graph& g, const std::string& op) {
  return static_cast<int>(std::count_if(g.nodes.begin(), g.nodes.end(),
                                        [&](const Node& n) { return n.op_type == op; }));
}

inline SymbolicShape declare(const Shape& shape, Decl decl, int& symbol) {
  SymbolicShape s;
  for (int64_t d : shape) {
    if (decl == Decl::Full || (decl == Decl::Batch && !s.empty())) {
      s.push_back(Dim::known(d));
    } else if (decl == Decl::Batch) {
      s.push_back(Dim::named("batch"));
    } else {
      std::string name = "s";
      name += std::to_string(symbol++);
      s.push_back(Dim::named(name));
    }
  }
  return s;
}

inline std::shared_ptr<Graph> make_graph(const std::vector<Node>& nodes,
                                         const std::vector<Input>& inputs, const std::string& y,
                                         int64_t opset, Decl decl) {
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
  for (const Node& n : nodes)  // the rewrite domain's nodes (AllReduceSum) are at its opset 1
    if (!n.domain.empty()) g->opset_imports[n.domain] = 1;
  g->outputs.push_back({y, {}});
  return g;
}

inline std::vector<Tensor> feeds_of(const std::vector<Input>& inputs) {
  std::vector<Tensor> feeds;
  for (const auto& in : inputs)
    if (!in.constant) feeds.push_back(in.value);
  return feeds;
}

inline Tensor run_forward(std::shared_ptr<Graph> g, const std::vector<Tensor>& feeds) {
  Model model(g, Device::cpu());
  return model.run(feeds)[0];
}

// Forward graph + input dY + backward nodes; outputs the gradients of `xs`.
inline std::shared_ptr<Graph> training_graph(const Graph& forward,
                                             const std::vector<std::string>& xs,
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

inline double weighted_sum(const Tensor& y, const Tensor& w) {
  double s = 0;
  for (int64_t i = 0; i < y.numel(); ++i) s += y.item_as_double(i) * w.item_as_double(i);
  return s;
}

// Compares dL/dx for L = sum(y * dY) (dY random) with central differences, for every x in
// `xs` (names of fed inputs).
inline void check_gradients(const std::vector<Node>& nodes, std::vector<Input> inputs,
                            const std::string& y, const std::vector<std::string>& xs,
                            int64_t opset = 17, Decl decl = Decl::Full, double tol = 1e-6) {
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
inline void check_all_ways(const std::vector<Node>& nodes, const std::vector<Input>& inputs,
                           const std::string& y, const std::vector<std::string>& xs,
                           bool needs_rank = false) {
  check_gradients(nodes, inputs, y, xs, 12, Decl::Full);
  check_gradients(nodes, inputs, y, xs, 17, Decl::Full);
  check_gradients(nodes, inputs, y, xs, 17, Decl::Symbolic);
  if (!needs_rank) check_gradients(nodes, inputs, y, xs, 17, Decl::None);
}

inline Input in(const std::string& name, const Shape& shape, uint32_t seed, double lo = -1,
                double hi = 1) {
  return {name, random_tensor(shape, lo, hi, seed)};
}

inline Node node(const std::string& op, std::vector<std::string> ins, std::vector<std::string> outs,
                 std::map<std::string, Attribute> attrs = {}) {
  Node n = make_node(op, std::move(ins), std::move(outs));
  n.name = op + "_fwd";
  n.attributes = std::move(attrs);
  return n;
}

}  // namespace dprun::testing

/// Defines a finite-difference case for the gradient rule of `op` (an ONNX op type).
#define DPRUN_GRADIENT_CASE(op, name)                                             \
  static void gradient_case_##name();                                             \
  [[maybe_unused]] static const bool gradient_case_registered_##name =            \
      ::dprun::testing::register_gradient_case(#op, #name, gradient_case_##name); \
  static void gradient_case_##name()
