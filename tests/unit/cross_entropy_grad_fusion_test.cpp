// The scores' gradient of SoftmaxCrossEntropyLoss as its rule writes it
// (engine/rewrites/cross_entropy_grad_fusion.h): the CPU runs it as one SoftmaxCrossEntropyGrad
// node, in float32 within 1e-5 of the unfused rule's float64 values, for every reduction, ignored
// labels, class weights, classes in dim 1 with positions after them, and the training losses
// dprun builds (classes in the last dim, label smoothing); chains that compute something else, or
// whose inner values something else reads, are left as they are.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "engine/autograd/loss.h"
#include "fusion_test_util.h"
#include "gradient_check.h"
#include "op_test_util.h"

namespace dprun {
namespace {

using namespace dprun::testing;

struct CeCase {
  Shape scores;
  std::string reduction;
  std::optional<int64_t> ignore_index;
  bool weighted;
};

std::vector<CeCase> ce_cases() {
  return {{{8, 5}, "mean", std::nullopt, false},
          {{8, 5}, "sum", 2, false},
          {{16, 300}, "sum", -100, false},
          {{4, 6, 3}, "none", -1, true},
          {{4, 7, 2, 3}, "mean", 3, true}};
}

Shape label_shape(const Shape& scores) {
  Shape s = scores;
  s.erase(s.begin() + 1);
  return s;
}

// Labels in [0, C), every third position the ignored label when there is one.
Tensor labels_of(const CeCase& c) {
  const int64_t classes = c.scores[1];
  std::vector<int64_t> v;
  const Shape shape = label_shape(c.scores);
  for (int64_t p = 0; p < shape_numel(shape); ++p)
    v.push_back(c.ignore_index && p % 3 == 1 ? *c.ignore_index : (p * 3 + 1) % classes);
  return Tensor::from_vector<int64_t>(shape, v);
}

Tensor as(DType dtype, Tensor t) {
  return dtype == DType::Float32 ? to_float32(t) : t;
}

// The loss of the scores and dScores for the seed dY, in `dtype`.
std::shared_ptr<Graph> ce_gradient(const CeCase& c, DType dtype) {
  std::vector<Input> inputs = {{"scores", as(dtype, random_tensor(c.scores, -4, 4, 1))},
                               {"labels", labels_of(c)}};
  std::vector<std::string> operands = {"scores", "labels"};
  if (c.weighted) {
    inputs.push_back({"weight", as(dtype, random_tensor({c.scores[1]}, 0.5, 2, 2))});
    operands.push_back("weight");
  }
  std::map<std::string, Attribute> attrs = {{"reduction", Attribute::of_string(c.reduction)}};
  if (c.ignore_index) attrs["ignore_index"] = Attribute::of_int(*c.ignore_index);
  auto forward = make_graph({node("SoftmaxCrossEntropyLoss", operands, {"loss"}, attrs)}, inputs,
                            "loss", 17, Decl::Full);
  return with_gradient(*forward, GradientSpec{{"scores"}, "loss", "dY"}, dtype);
}

std::vector<Tensor> ce_feeds(const CeCase& c, DType dtype) {
  std::vector<Tensor> f = {as(dtype, random_tensor(c.scores, -4, 4, 1)), labels_of(c)};
  if (c.weighted) f.push_back(as(dtype, random_tensor({c.scores[1]}, 0.5, 2, 2)));
  const Shape dy = c.reduction == "none" ? label_shape(c.scores) : Shape{};
  f.push_back(as(dtype, random_tensor(dy, 0.5, 2, 7)));
  return f;
}

void expect_one_pass(const Graph& plan) {
  EXPECT_EQ(count_ops(plan, "SoftmaxCrossEntropyGrad"), 1);
  EXPECT_EQ(count_ops(plan, "Softmax"), 0);
  EXPECT_EQ(count_ops(plan, "ScatterElements"), 0);
}

TEST(SoftmaxCrossEntropyGrad, TheRulesBackwardRunsAsOneNodeWithTheFloat64Values) {
  for (const CeCase& c : ce_cases()) {
    SCOPED_TRACE(shape_to_string(c.scores) + " " + c.reduction + " ignore " +
                 (c.ignore_index ? std::to_string(*c.ignore_index) : "none") +
                 (c.weighted ? " weighted" : ""));
    const Tensor want =
        compiled(ce_gradient(c, DType::Float64), false).run(ce_feeds(c, DType::Float64))[0];
    for (DType dtype : {DType::Float32, DType::Float64}) {
      Model fused = compiled(ce_gradient(c, dtype), true);
      expect_one_pass(*fused.plan()->graph_ptr());
      EXPECT_EQ(count_ops(*fused.plan()->graph_ptr(), "ConstantOfShape"), 0);
      expect_near_in_scale(fused.run(ce_feeds(c, dtype))[0], want,
                           dtype == DType::Float32 ? 1e-5 : 1e-13);
    }
  }
}

// dprun's cross_entropy on logits [2, 5, 7] with the classes in `class_dim`, the gradient of
// the logits for a loss seed of 1.
std::shared_ptr<Graph> training_loss_gradient(int64_t class_dim, double smoothing, DType dtype) {
  Shape shape = {2, 5, 7};
  auto g = std::make_shared<Graph>();
  g->opset_imports[""] = 17;
  SymbolicShape declared;
  for (int64_t d : shape) declared.push_back(Dim::known(d));
  g->inputs.push_back({"x", {dtype, declared}});
  g->nodes.push_back(node("Identity", {"x"}, {"logits"}));
  g->outputs.push_back({"logits", {dtype, declared}});
  const LossNodes loss = append_loss(
      *g, LossSpec{.class_dim = class_dim, .ignore_index = -100, .label_smoothing = smoothing});
  return with_gradient(*g, GradientSpec{{"x"}, loss.loss, ""}, dtype);
}

std::vector<Tensor> training_loss_feeds(int64_t class_dim, DType dtype) {
  const int64_t classes = class_dim == 1 ? 5 : 7;
  Shape target = {2, 5, 7};
  target.erase(target.begin() + (class_dim < 0 ? 2 : class_dim));
  std::vector<int64_t> v;
  for (int64_t p = 0; p < shape_numel(target); ++p) v.push_back(p % 4 == 2 ? -100 : p % classes);
  return {as(dtype, random_tensor({2, 5, 7}, -4, 4, 3)), Tensor::from_vector<int64_t>(target, v)};
}

TEST(SoftmaxCrossEntropyGrad, TheTrainingLossesGradientsRunFused) {
  for (int64_t class_dim : {-1, 1}) {
    for (double smoothing : {0.0, 0.1}) {
      SCOPED_TRACE("class dim " + std::to_string(class_dim) + " smoothing " +
                   std::to_string(smoothing));
      const Tensor want =
          compiled(training_loss_gradient(class_dim, smoothing, DType::Float64), false)
              .run(training_loss_feeds(class_dim, DType::Float64))[0];
      Model fused = compiled(training_loss_gradient(class_dim, smoothing, DType::Float32), true);
      const Graph& plan = *fused.plan()->graph_ptr();
      expect_one_pass(plan);
      // Label smoothing's mean over the classes goes back through LogSoftmax's rule.
      EXPECT_EQ(count_ops(plan, "LogSoftmaxGrad"), smoothing > 0 ? 1 : 0);
      expect_near_in_scale(fused.run(training_loss_feeds(class_dim, DType::Float32))[0], want,
                           1e-5);
    }
  }
}

Node* find_node(Graph& g, const std::string& op) {
  auto it =
      std::find_if(g.nodes.begin(), g.nodes.end(), [&](const Node& n) { return n.op_type == op; });
  return it == g.nodes.end() ? nullptr : &*it;
}

int fused_count(std::shared_ptr<Graph> g) {
  return count_ops(*compiled(std::move(g), true).plan()->graph_ptr(), "SoftmaxCrossEntropyGrad");
}

TEST(SoftmaxCrossEntropyGrad, LeavesAloneWhatItDoesNotCompute) {
  const CeCase c{{6, 4}, "mean", -100, false};
  ASSERT_EQ(fused_count(ce_gradient(c, DType::Float32)), 1);
  // The recomputed softmax is also a result.
  auto g = ce_gradient(c, DType::Float32);
  g->outputs.push_back({find_node(*g, "Softmax")->outputs[0], {}});
  EXPECT_EQ(fused_count(g), 0);
  // The scatter writes into ones, not zeros.
  g = ce_gradient(c, DType::Float32);
  find_node(*g, "ConstantOfShape")->attributes["value"] =
      Attribute::of_tensor(Tensor::from_vector<float>({1}, {1.0f}));
  EXPECT_EQ(fused_count(g), 0);
  // The scattered values are not the negated scale.
  g = ce_gradient(c, DType::Float32);
  find_node(*g, "Neg")->inputs[0] = "scores";
  EXPECT_EQ(fused_count(g), 0);
  // The scatter adds where it lands.
  g = ce_gradient(c, DType::Float32);
  find_node(*g, "ScatterElements")->attributes["reduction"] = Attribute::of_string("add");
  EXPECT_EQ(fused_count(g), 0);
  // A softmax over another axis.
  g = ce_gradient(c, DType::Float32);
  find_node(*g, "Softmax")->attributes["axis"] = Attribute::of_int(0);
  EXPECT_EQ(fused_count(g), 0);
}

}  // namespace
}  // namespace dprun
