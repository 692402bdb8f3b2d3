// Softmax's and LogSoftmax's input gradients as their rules write them
// (engine/rewrites/softmax_grad_fusion.h): the CPU runs each as one SoftmaxGrad or LogSoftmaxGrad
// node, in float32 within 1e-5 of the unfused rule's float64 values, over contiguous and strided
// axes and the flattened axes of opsets before 13; chains whose inner values something else reads
// are left as they are.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "fusion_test_util.h"
#include "gradient_check.h"
#include "op_test_util.h"

namespace dprun {
namespace {

using namespace dprun::testing;

struct SmCase {
  Shape x;
  int64_t axis;
  int64_t opset;
};

std::vector<SmCase> sm_cases() {
  return {{{4, 5, 16}, -1, 17},   // attention's rows
          {{2, 3, 300}, 2, 13},   // a long row, a non-negative axis
          {{3, 6, 5}, 1, 17},     // strided: the axis inside
          {{5, 3, 4, 2}, 0, 17},  // strided: the first axis
          {{3, 4, 5}, 1, 11}};    // before opset 13: the axes from 1 on, flattened
}

// Softmax or LogSoftmax of x and dX for the seed dY, in `dtype`.
std::shared_ptr<Graph> sm_gradient(const char* op, const SmCase& c, DType dtype) {
  Input x = in("x", c.x, 1, -3, 3);
  if (dtype == DType::Float32) x.value = to_float32(x.value);
  auto forward = make_graph({node(op, {"x"}, {"y"}, {{"axis", Attribute::of_int(c.axis)}})}, {x},
                            "y", c.opset, Decl::Full);
  return with_gradient(*forward, GradientSpec{{"x"}, "y", "dY"}, dtype);
}

std::vector<Tensor> sm_feeds(const SmCase& c, DType dtype) {
  std::vector<Tensor> f = {random_tensor(c.x, -3, 3, 1), random_tensor(c.x, -1, 1, 7)};
  if (dtype == DType::Float32)
    for (Tensor& t : f) t = to_float32(t);
  return f;
}

void expect_fused_like_the_rule(const char* op, const char* fused_op) {
  for (const SmCase& c : sm_cases()) {
    SCOPED_TRACE(std::string(op) + " " + shape_to_string(c.x) + " axis " + std::to_string(c.axis) +
                 " opset " + std::to_string(c.opset));
    const Tensor want =
        compiled(sm_gradient(op, c, DType::Float64), false).run(sm_feeds(c, DType::Float64))[0];
    for (DType dtype : {DType::Float32, DType::Float64}) {
      Model fused = compiled(sm_gradient(op, c, dtype), true);
      const Graph& plan = *fused.plan()->graph_ptr();
      EXPECT_EQ(count_ops(plan, fused_op), 1);
      EXPECT_EQ(count_ops(plan, "ReduceSum"), 0);
      EXPECT_EQ(count_ops(plan, "Sub"), 0);
      expect_near_in_scale(fused.run(sm_feeds(c, dtype))[0], want,
                           dtype == DType::Float32 ? 1e-5 : 1e-13);
    }
  }
}

TEST(SoftmaxGrad, TheRulesBackwardRunsAsOneNodeWithTheFloat64Values) {
  expect_fused_like_the_rule("Softmax", "SoftmaxGrad");
}

TEST(LogSoftmaxGrad, TheRulesBackwardRunsAsOneNodeWithTheFloat64Values) {
  expect_fused_like_the_rule("LogSoftmax", "LogSoftmaxGrad");
}

// The node of `g` with op `op` whose first input is `first` (any when empty).
Node* find_node(Graph& g, const std::string& op, const std::string& first = "") {
  auto it = std::find_if(g.nodes.begin(), g.nodes.end(), [&](const Node& n) {
    return n.op_type == op && (first.empty() || n.inputs[0] == first);
  });
  return it == g.nodes.end() ? nullptr : &*it;
}

int fused_count(std::shared_ptr<Graph> g, const char* op) {
  return count_ops(*compiled(std::move(g), true).plan()->graph_ptr(), op);
}

TEST(SoftmaxGrad, LeavesAloneWhatItDoesNotCompute) {
  const SmCase c{{4, 6}, -1, 17};
  ASSERT_EQ(fused_count(sm_gradient("Softmax", c, DType::Float32), "SoftmaxGrad"), 1);
  // The sum dY * Y is also a result.
  auto g = sm_gradient("Softmax", c, DType::Float32);
  g->outputs.push_back({find_node(*g, "ReduceSum")->outputs[0], {}});
  EXPECT_EQ(fused_count(g, "SoftmaxGrad"), 0);
  // The difference dY - sum is read by another node.
  g = sm_gradient("Softmax", c, DType::Float32);
  Node neg = node("Neg", {find_node(*g, "Sub")->outputs[0]}, {"other"});
  g->nodes.push_back(neg);
  g->outputs.push_back({"other", {}});
  EXPECT_EQ(fused_count(g, "SoftmaxGrad"), 0);
  // The final product by something other than Y.
  g = sm_gradient("Softmax", c, DType::Float32);
  Node* dx = find_node(*g, "Mul", "y");
  ASSERT_NE(dx, nullptr);
  dx->inputs[0] = "x";
  EXPECT_EQ(fused_count(g, "SoftmaxGrad"), 0);
  // A sum over two axes.
  g = sm_gradient("Softmax", c, DType::Float32);
  const std::string axes = find_node(*g, "ReduceSum")->inputs[1];
  for (Node& n : g->nodes)
    if (n.outputs[0] == axes)
      n.attributes["value"] = Attribute::of_tensor(Tensor::from_vector<int64_t>({2}, {0, 1}));
  EXPECT_EQ(fused_count(g, "SoftmaxGrad"), 0);
}

TEST(LogSoftmaxGrad, LeavesAloneWhatItDoesNotCompute) {
  const SmCase c{{4, 6}, -1, 17};
  ASSERT_EQ(fused_count(sm_gradient("LogSoftmax", c, DType::Float32), "LogSoftmaxGrad"), 1);
  // exp(Y) is also a result.
  auto g = sm_gradient("LogSoftmax", c, DType::Float32);
  g->outputs.push_back({find_node(*g, "Exp")->outputs[0], {}});
  EXPECT_EQ(fused_count(g, "LogSoftmaxGrad"), 0);
  // The difference from another value than the summed one.
  g = sm_gradient("LogSoftmax", c, DType::Float32);
  find_node(*g, "Sub")->inputs[0] = "x";
  EXPECT_EQ(fused_count(g, "LogSoftmaxGrad"), 0);
  // A sum without keepdims.
  g = sm_gradient("LogSoftmax", c, DType::Float32);
  find_node(*g, "ReduceSum")->attributes["keepdims"] = Attribute::of_int(0);
  EXPECT_EQ(fused_count(g, "LogSoftmaxGrad"), 0);
}

}  // namespace
}  // namespace dprun
