// GELU's erf form as exporters write it, and its gradient (engine/rewrites/gelu_fusion.h): the
// gradient builder differentiates the chain by Gelu's rule (checked by finite differences and
// against the chain's own rules), the backends run that gradient as one GeluGrad node with the
// unfused graph's values, and Gelu-20's rule in both approximations.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "engine/rewrites/rewrite_domain.h"
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
  GradientResult r = build_gradient(*forward, spec);
  auto g = std::make_shared<Graph>(*forward);
  g->inputs.push_back({"dY", {dtype, std::nullopt}});
  g->nodes.insert(g->nodes.end(), r.nodes.begin(), r.nodes.end());
  g->outputs = {{r.gradients[0], {}}};
  if (result) *result = r;
  return g;
}

std::vector<Tensor> feeds(DType dtype) {
  std::vector<Tensor> f = feeds_of(gelu_inputs(dtype));
  Tensor dy = random_tensor({3, 7}, -1, 1, 7);
  f.push_back(dtype == DType::Float32 ? to_float32(dy) : dy);
  return f;
}

Model compiled(std::shared_ptr<Graph> g, bool fuse) {
  return Model(std::move(g), Device::cpu(), {.channels_last = false, .fuse_ops = fuse});
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
