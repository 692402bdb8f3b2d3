// GELU's erf and tanh forms as exporters write them, and both forms' gradients
// (engine/rewrites/gelu_fusion.h): the gradient builder differentiates each chain by Gelu's rule
// (checked by finite differences and against the chain's own rules), the backends run the tanh
// chain as one Gelu node and each form's gradient as one GeluGrad node with the unfused graph's
// values, and Gelu-20's rule in both approximations.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "engine/rewrites/rewrite_domain.h"
#include "fusion_test_util.h"
#include "gradient_check.h"
#include "op_test_util.h"

namespace dprun {
namespace {

using namespace dprun::testing;

// y = GELU(x) as PyTorch's exporter writes it before opset 20: (x * (1 + erf(x / sqrt 2))) * 0.5,
// or with the 0.5 applied to x first.
std::vector<Node> erf_gelu(bool half_first) {
  std::vector<Node> nodes = {node("Div", {"x", "sqrt2"}, {"s"}), node("Erf", {"s"}, {"e"}),
                             node("Add", {"e", "one"}, {"b"})};
  if (half_first) {
    nodes.push_back(node("Mul", {"x", "half"}, {"hx"}));
    nodes.push_back(node("Mul", {"hx", "b"}, {"y"}));
  } else {
    nodes.push_back(node("Mul", {"x", "b"}, {"xb"}));
    nodes.push_back(node("Mul", {"xb", "half"}, {"y"}));
  }
  for (size_t k = 0; k < nodes.size(); ++k) nodes[k].name = "gelu_" + std::to_string(k);
  return nodes;
}

std::vector<Input> gelu_inputs(DType dtype) {
  auto constant = [&](const char* name, double v) {
    return Input{name,
                 dtype == DType::Float32 ? Tensor::scalar<float>(static_cast<float>(v))
                                         : Tensor::scalar<double>(v),
                 true};
  };
  Input x = in("x", {3, 7}, 1, -4, 4);
  if (dtype == DType::Float32) x.value = to_float32(x.value);
  return {x, constant("sqrt2", std::sqrt(2.0)), constant("one", 1), constant("half", 0.5)};
}

// The forward chain and dX for the seed dY.
std::shared_ptr<Graph> gradient_graph(bool half_first, DType dtype, bool composites,
                                      GradientResult* result = nullptr) {
  auto forward = make_graph(erf_gelu(half_first), gelu_inputs(dtype), "y", 17, Decl::Full);
  GradientSpec spec{{"x"}, "y", "dY"};
  spec.differentiate_composites = composites;
  return with_gradient(*forward, spec, dtype, result);
}

std::vector<Tensor> feeds(DType dtype) {
  std::vector<Tensor> f = feeds_of(gelu_inputs(dtype));
  Tensor dy = random_tensor({3, 7}, -1, 1, 7);
  f.push_back(dtype == DType::Float32 ? to_float32(dy) : dy);
  return f;
}

int emitted(const GradientResult& r, const std::string& op) {
  return static_cast<int>(std::count_if(r.nodes.begin(), r.nodes.end(),
                                        [&](const Node& n) { return n.op_type == op; }));
}

void expect_near(const Tensor& got, const Tensor& want, double tol) {
  ASSERT_EQ(got.shape(), want.shape());
  for (int64_t i = 0; i < want.numel(); ++i)
    ASSERT_NEAR(got.item_as_double(i), want.item_as_double(i),
                tol * std::max(1.0, std::abs(want.item_as_double(i))))
        << "element " << i;
}

TEST(ErfGelu, IsDifferentiatedAsOneGelu) {
  for (bool half_first : {false, true}) {
    SCOPED_TRACE(half_first ? "0.5 * x first" : "0.5 last");
    GradientResult as_one, per_node;
    auto composite = gradient_graph(half_first, DType::Float64, true, &as_one);
    auto chain = gradient_graph(half_first, DType::Float64, false, &per_node);
    // Gelu's rule: one Erf and one Exp, no Div's rule (the chain's own rules emit a Div for
    // the Div by sqrt 2 and a Sum of x's two contributions).
    EXPECT_EQ(emitted(as_one, "Erf"), 1);
    EXPECT_EQ(emitted(as_one, "Exp"), 1);
    EXPECT_EQ(emitted(as_one, "Div"), 0);
    EXPECT_EQ(emitted(as_one, "Sum"), 0);
    EXPECT_EQ(emitted(per_node, "Sum"), 1);
    expect_near(compiled(composite, false).run(feeds(DType::Float64))[0],
                compiled(chain, false).run(feeds(DType::Float64))[0], 1e-14);
    check_gradients(erf_gelu(half_first), gelu_inputs(DType::Float64), "y", {"x"}, 17);
  }
}

TEST(ErfGelu, TheGradientRunsAsOneGeluGradNode) {
  for (DType dtype : {DType::Float32, DType::Float64}) {
    SCOPED_TRACE(dtype_name(dtype));
    auto g = gradient_graph(false, dtype, true);
    Model fused = compiled(g, true);
    const Graph& plan = *fused.plan()->graph_ptr();
    EXPECT_EQ(count_ops(plan, "GeluGrad"), 1);
    EXPECT_EQ(count_ops(plan, "Gelu"), 1);
    EXPECT_EQ(count_ops(plan, "Erf"), 0);
    EXPECT_EQ(count_ops(plan, "Exp"), 0);
    // The same function with Erf's and Exp's own kernels: float32's ulps apart at most.
    const double tol = dtype == DType::Float32 ? 1e-6 : 1e-14;
    const std::vector<Tensor> f = feeds(dtype);
    const std::vector<Tensor> got = fused.run(f), want = compiled(g, false).run(f);
    expect_near(got[0], want[0], tol);
  }
}

TEST(ErfGelu, LeavesAGradientOfAnotherShapeAlone) {
  auto g = gradient_graph(false, DType::Float32, true);
  // The gradient's 0.5 changed: no longer GELU's derivative.
  auto half = std::find_if(g->nodes.begin(), g->nodes.end(), [](const Node& n) {
    return n.op_type == "Mul" && n.name.find("grad/") == 0 &&
           n.inputs[0].find("Add") != std::string::npos;
  });
  ASSERT_NE(half, g->nodes.end());
  g->initializers["quarter"] = Tensor::scalar<float>(0.25f);
  half->inputs[1] = "quarter";
  EXPECT_EQ(count_ops(*compiled(g, true).plan()->graph_ptr(), "GeluGrad"), 0);
  // A value inside the gradient is also a result.
  g = gradient_graph(false, DType::Float32, true);
  auto exp = std::find_if(g->nodes.begin(), g->nodes.end(),
                          [](const Node& n) { return n.op_type == "Exp"; });
  ASSERT_NE(exp, g->nodes.end());
  g->outputs.push_back({exp->outputs[0], {}});
  EXPECT_EQ(count_ops(*compiled(g, true).plan()->graph_ptr(), "GeluGrad"), 0);
}

// y = GELU(x) in its tanh form as exporters write it before opset 20: PyTorch's exporter,
// 0.5 * (x * (1 + tanh(k * (x + a * (x * (x * x)))))), or GPT-2's NewGELU,
// ((0.5 * x) * (1 + tanh(k * (x + a * x^3)))), with k = sqrt(2 / pi) and a = 0.044715.
std::vector<Node> tanh_gelu(bool gpt2) {
  std::vector<Node> nodes;
  if (gpt2) {
    nodes = {node("Pow", {"x", "three"}, {"cube"}), node("Mul", {"kappa", "cube"}, {"kc"}),
             node("Add", {"x", "kc"}, {"sum"}),     node("Mul", {"beta", "sum"}, {"arg"}),
             node("Tanh", {"arg"}, {"t"}),          node("Add", {"one", "t"}, {"b"}),
             node("Mul", {"half", "x"}, {"hx"}),    node("Mul", {"hx", "b"}, {"y"})};
  } else {
    nodes = {node("Mul", {"x", "x"}, {"sq"}),        node("Mul", {"x", "sq"}, {"cube"}),
             node("Mul", {"kappa", "cube"}, {"kc"}), node("Add", {"x", "kc"}, {"sum"}),
             node("Mul", {"beta", "sum"}, {"arg"}),  node("Tanh", {"arg"}, {"t"}),
             node("Add", {"one", "t"}, {"b"}),       node("Mul", {"x", "b"}, {"xb"}),
             node("Mul", {"half", "xb"}, {"y"})};
  }
  for (size_t k = 0; k < nodes.size(); ++k) nodes[k].name = "gelu_" + std::to_string(k);
  return nodes;
}

std::vector<Input> tanh_gelu_inputs(DType dtype, double kappa = 0.044715) {
  std::vector<Input> inputs = gelu_inputs(dtype);
  inputs.erase(inputs.begin() + 1);  // no sqrt 2
  auto constant = [&](const char* name, double v) {
    return Input{name,
                 dtype == DType::Float32 ? Tensor::scalar<float>(static_cast<float>(v))
                                         : Tensor::scalar<double>(v),
                 true};
  };
  inputs.push_back(constant("three", 3));
  inputs.push_back(constant("kappa", kappa));
  inputs.push_back(constant("beta", std::sqrt(2 / M_PI)));
  return inputs;
}

std::shared_ptr<Graph> tanh_gelu_graph(bool gpt2, DType dtype) {
  return make_graph(tanh_gelu(gpt2), tanh_gelu_inputs(dtype), "y", 17, Decl::Full);
}

TEST(TanhGelu, RunsAsOneGeluNodeWithTheChainsValues) {
  for (bool gpt2 : {false, true}) {
    SCOPED_TRACE(gpt2 ? "GPT-2's NewGELU" : "PyTorch's exporter");
    const Tensor want = compiled(tanh_gelu_graph(gpt2, DType::Float64), false)
                            .run(feeds_of(tanh_gelu_inputs(DType::Float64)))[0];
    for (DType dtype : {DType::Float32, DType::Float64}) {
      Model fused = compiled(tanh_gelu_graph(gpt2, dtype), true);
      const Graph& plan = *fused.plan()->graph_ptr();
      ASSERT_EQ(plan.nodes.size(), 1u);
      EXPECT_EQ(plan.nodes[0].op_type, "Gelu");
      EXPECT_EQ(plan.nodes[0].attr_string("approximate", "none"), "tanh");
      expect_near(fused.run(feeds_of(tanh_gelu_inputs(dtype)))[0], want,
                  dtype == DType::Float32 ? 1e-6 : 1e-14);
    }
  }
}

TEST(TanhGelu, IsDifferentiatedAsOneGeluByItsTanhRule) {
  for (bool gpt2 : {false, true}) {
    SCOPED_TRACE(gpt2 ? "GPT-2's NewGELU" : "PyTorch's exporter");
    auto gradient = [&](bool composites, GradientResult& r) {
      GradientSpec spec{{"x"}, "y", "dY"};
      spec.differentiate_composites = composites;
      auto g = with_gradient(*tanh_gelu_graph(gpt2, DType::Float64), spec, DType::Float64, &r);
      return compiled(g, false).run(feeds(DType::Float64))[0];
    };
    GradientResult as_one, per_node;
    const Tensor composite = gradient(true, as_one), chain = gradient(false, per_node);
    // Gelu's tanh rule recomputes the Tanh (Tanh's own rule reads its output) and needs no Sum
    // of x's several uses, nor Pow's rule.
    EXPECT_EQ(emitted(as_one, "Tanh"), 1);
    EXPECT_EQ(emitted(per_node, "Tanh"), 0);
    EXPECT_EQ(emitted(as_one, "Sum"), 0);
    EXPECT_EQ(emitted(per_node, "Sum"), 1);
    EXPECT_EQ(emitted(as_one, "Pow"), 0);
    expect_near(composite, chain, 1e-13);
    check_gradients(tanh_gelu(gpt2), tanh_gelu_inputs(DType::Float64), "y", {"x"}, 17);
  }
}

// The forward chain and dX for the seed dY, the chain differentiated as one Gelu.
std::shared_ptr<Graph> tanh_gradient_graph(DType dtype) {
  GradientSpec spec{{"x"}, "y", "dY"};
  spec.differentiate_composites = true;
  return with_gradient(*tanh_gelu_graph(false, dtype), spec, dtype);
}

TEST(TanhGelu, TheGradientRunsAsOneGeluGradNode) {
  // The reference: the float64 graph with each node's own kernel.
  const Tensor want =
      compiled(tanh_gradient_graph(DType::Float64), false).run(feeds(DType::Float64))[0];
  for (DType dtype : {DType::Float32, DType::Float64}) {
    SCOPED_TRACE(dtype_name(dtype));
    Model fused = compiled(tanh_gradient_graph(dtype), true);
    const Graph& plan = *fused.plan()->graph_ptr();
    ASSERT_EQ(count_ops(plan, "GeluGrad"), 1);
    EXPECT_EQ(count_ops(plan, "Gelu"), 1);
    EXPECT_EQ(count_ops(plan, "Tanh"), 0);
    auto grad = std::find_if(plan.nodes.begin(), plan.nodes.end(),
                             [](const Node& n) { return n.op_type == "GeluGrad"; });
    EXPECT_EQ(grad->attr_string("approximate", "none"), "tanh");
    expect_near(fused.run(feeds(dtype))[0], want, dtype == DType::Float32 ? 1e-6 : 1e-13);
  }
}

TEST(TanhGelu, LeavesAGradientOfAnotherShapeAlone) {
  // The gradient's 3a (a Constant the rule emits) changed: no longer GELU's derivative.
  auto g = tanh_gradient_graph(DType::Float32);
  int changed = 0;
  for (Node& n : g->nodes)
    if (auto value = n.attributes.find("value");
        n.op_type == "Constant" && value != n.attributes.end() &&
        std::abs(value->second.t.item_as_double(0) - 3 * 0.044715) < 1e-6) {
      value->second = Attribute::of_tensor(Tensor::scalar<float>(0.2f));
      ++changed;
    }
  ASSERT_EQ(changed, 1);
  EXPECT_EQ(count_ops(*compiled(g, true).plan()->graph_ptr(), "GeluGrad"), 0);
  // A value inside the gradient (1 - t^2) is also a result.
  g = tanh_gradient_graph(DType::Float32);
  auto sub = std::find_if(g->nodes.begin(), g->nodes.end(),
                          [](const Node& n) { return n.op_type == "Sub"; });
  ASSERT_NE(sub, g->nodes.end());
  g->outputs.push_back({sub->outputs[0], {}});
  EXPECT_EQ(count_ops(*compiled(g, true).plan()->graph_ptr(), "GeluGrad"), 0);
}

TEST(TanhGelu, LeavesAloneWhatGeluDoesNotCompute) {
  // Another cubic coefficient: not GELU.
  auto g =
      make_graph(tanh_gelu(false), tanh_gelu_inputs(DType::Float32, 0.05), "y", 17, Decl::Full);
  EXPECT_EQ(count_ops(*compiled(g, true).plan()->graph_ptr(), "Tanh"), 1);
  // x^2 read outside the chain as well.
  g = tanh_gelu_graph(false, DType::Float32);
  g->outputs.push_back({"sq", {}});
  EXPECT_EQ(count_ops(*compiled(g, true).plan()->graph_ptr(), "Tanh"), 1);
  // Tanh of something other than the argument's product.
  g = tanh_gelu_graph(true, DType::Float32);
  g->nodes[4].inputs[0] = "sum";
  EXPECT_EQ(count_ops(*compiled(g, true).plan()->graph_ptr(), "Tanh"), 1);
  // On a GPU the fused Gelu is the erf form's alone: the tanh chain stays as it is.
  Model on_sim(tanh_gelu_graph(false, DType::Float32), Device::sim(0));
  EXPECT_EQ(count_ops(*on_sim.plan()->graph_ptr(), "Tanh"), 1);
}

DPRUN_GRADIENT_CASE(Gelu, GeluBothApproximations) {
  for (const char* approximate : {"none", "tanh"}) {
    SCOPED_TRACE(approximate);
    check_gradients(
        {node("Gelu", {"x"}, {"y"}, {{"approximate", Attribute::of_string(approximate)}})},
        {in("x", {2, 5}, 3, -4, 4)}, "y", {"x"}, 20);
  }
}

// The rewrite domain's Gelu, which the builder differentiates the erf chain as, on its own.
[[maybe_unused]] const bool kRewriteDomainGeluCase =
    register_gradient_case(std::string(kRewriteDomain) + ".Gelu", "RewriteDomainGelu", [] {
      Node gelu = node("Gelu", {"x"}, {"y"});
      gelu.domain = kRewriteDomain;
      check_gradients({gelu}, {in("x", {2, 5}, 4, -4, 4)}, "y", {"x"}, 17);
    });

}  // namespace
}  // namespace dprun
