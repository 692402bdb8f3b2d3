// The class losses' options (engine/autograd/loss.h): ignore_index and label smoothing against
// values worked out from their definitions in torch.nn.functional.cross_entropy, and the
// options a loss does not take. models/training/gpt_smooth_ignore checks training with both
// against PyTorch.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <utility>

#include "engine/autograd/loss.h"
#include "engine/model.h"
#include "error_test_util.h"
#include "graph_test_util.h"

namespace dprun {
namespace {

using testing::error_of;

/// logits [3, 4] -> the mean loss of `spec` against `target`.
double loss_of(const LossSpec& spec, const std::vector<float>& logits,
               const std::vector<int64_t>& target, int64_t opset = 17) {
  auto g = std::make_shared<Graph>();
  g->opset_imports[""] = opset;
  g->inputs.push_back({"x", {DType::Float32, SymbolicShape{Dim::known(3), Dim::known(4)}}});
  g->nodes.push_back(testing::make_node("Identity", {"x"}, {"logits"}));
  g->nodes.back().name = "identity";
  g->outputs.push_back({"logits", {DType::Float32, SymbolicShape{Dim::known(3), Dim::known(4)}}});
  const LossNodes loss = append_loss(*g, spec);
  g->outputs = {{loss.loss, {DType::Float32, SymbolicShape{}}}};
  Model model(g, Device::cpu(0));
  const std::vector<Tensor> feeds = {Tensor::from_vector<float>({3, 4}, logits),
                                     Tensor::from_vector<int64_t>({3}, target)};
  return model.run(feeds).at(0).item_as_double();
}

const std::vector<float> kLogits = {1, 2, 0.5f, -1, 0, 0.25f, 3, 1, -2, 1, 1, 0.5f};

/// -log_softmax of row r, class c, in double.
double neg_log_prob(int r, int c) {
  double sum = 0;
  for (int k = 0; k < 4; ++k) sum += std::exp(static_cast<double>(kLogits[r * 4 + k]));
  return std::log(sum) - kLogits[r * 4 + c];
}

TEST(LossOptions, IgnoredTargetsAndLabelSmoothingAsPyTorchDefinesThem) {
  // Row 1 is padding (-100, ignored by default): the means are over rows 0 and 2.
  const std::vector<int64_t> target = {1, -100, 3};
  const double ce = (neg_log_prob(0, 1) + neg_log_prob(2, 3)) / 2;
  EXPECT_NEAR(loss_of({}, kLogits, target), ce, 1e-6);
  double uniform = 0;
  for (int r : {0, 2})
    for (int c = 0; c < 4; ++c) uniform += neg_log_prob(r, c) / 4;
  uniform /= 2;
  LossSpec smooth{.label_smoothing = 0.1};
  EXPECT_NEAR(loss_of(smooth, kLogits, target), 0.9 * ce + 0.1 * uniform, 1e-6);
  // Another ignore_index: -100 is then an out-of-range class, and 3 is ignored.
  LossSpec ignore3{.ignore_index = 3};
  EXPECT_NEAR(loss_of(ignore3, kLogits, {1, 2, 3}), (neg_log_prob(0, 1) + neg_log_prob(1, 2)) / 2,
              1e-6);
  // Without ignored targets smoothing averages over every row.
  double all = 0, all_uniform = 0;
  for (int r = 0; r < 3; ++r) {
    all += neg_log_prob(r, r) / 3;
    for (int c = 0; c < 4; ++c) all_uniform += neg_log_prob(r, c) / 12;
  }
  EXPECT_NEAR(loss_of({.ignore_index = std::nullopt, .label_smoothing = 0.25}, kLogits, {0, 1, 2}),
              0.75 * all + 0.25 * all_uniform, 1e-6);
}

TEST(LossOptions, ABatchWhoseTargetsAreAllIgnoredHasTheLossZero) {
  // PyTorch's mean is 0/0 here; a replica holding only padding must add nothing, not NaN.
  const std::vector<int64_t> padding = {-100, -100, -100};
  EXPECT_EQ(loss_of({}, kLogits, padding), 0.0);
  EXPECT_EQ(loss_of({.label_smoothing = 0.1}, kLogits, padding), 0.0);
  EXPECT_EQ(loss_of({.kind = LossKind::Nll}, kLogits, padding), 0.0);
}

TEST(LossOptions, RefusesSmoothingWhereItHasNoMeaning) {
  EXPECT_EQ(error_of([] {
              loss_of({.label_smoothing = 1.5}, kLogits, {0, 1, 2});
            }),
            "loss: label smoothing 1.5 is not between 0 and 1");
  EXPECT_EQ(error_of([] {
              loss_of({.kind = LossKind::Nll, .label_smoothing = 0.1}, kLogits, {0, 1, 2});
            }),
            "loss: label smoothing is cross_entropy's, not nll's");
  EXPECT_EQ(error_of([] {
              loss_of({.label_smoothing = 0.1}, kLogits, {0, 1, 2}, 12);
            }),
            "loss: label smoothing needs ai.onnx opset 13 or newer (LogSoftmax over dim 1); the "
            "model imports opset 12");
}

}  // namespace
}  // namespace dprun

namespace dprun {
namespace {

int count_ops(const Graph& g, const std::string& op) {
  return static_cast<int>(std::count_if(g.nodes.begin(), g.nodes.end(),
                                        [&](const Node& n) { return n.op_type == op; }));
}

/// The loss of `spec` for scores [2, 3, 4] (classes last, declared `classes` or unknown) and
/// the graph it ran in.
std::pair<double, std::shared_ptr<Graph>> sequence_loss(const LossSpec& spec, Dim classes,
                                                        const std::vector<int64_t>& target) {
  auto g = std::make_shared<Graph>();
  g->opset_imports[""] = 17;
  const SymbolicShape shape{Dim::known(2), Dim::known(3), classes};
  g->inputs.push_back({"x", {DType::Float32, shape}});
  g->nodes.push_back(testing::make_node("Identity", {"x"}, {"logits"}));
  g->nodes.back().name = "identity";
  g->outputs.push_back({"logits", {DType::Float32, shape}});
  const LossNodes loss = append_loss(*g, spec);
  g->outputs = {{loss.loss, {DType::Float32, SymbolicShape{}}}};
  std::vector<float> logits = kLogits;
  for (float v : kLogits) logits.push_back(0.5f - v);
  Model model(g, Device::cpu(0));
  const std::vector<Tensor> feeds = {Tensor::from_vector<float>({2, 3, 4}, logits),
                                     Tensor::from_vector<int64_t>({2, 3}, target)};
  return {model.run(feeds).at(0).item_as_double(), g};
}

TEST(LossOptions, ClassesInTheLastDimAreReadAsRowsWithoutATranspose) {
  // Row r of the 6 positions: kLogits' row r for r < 3, 0.5 minus it after.
  auto neg_log_prob6 = [](int r, int c) {
    auto at = [&](int k) { return r < 3 ? kLogits[r * 4 + k] : 0.5 - kLogits[(r - 3) * 4 + k]; };
    double sum = 0;
    for (int k = 0; k < 4; ++k) sum += std::exp(static_cast<double>(at(k)));
    return std::log(sum) - at(c);
  };
  const std::vector<int64_t> target = {1, -100, 3, 0, 2, -100};
  const double ce =
      (neg_log_prob6(0, 1) + neg_log_prob6(2, 3) + neg_log_prob6(3, 0) + neg_log_prob6(4, 2)) / 4;
  for (const LossSpec& spec :
       {LossSpec{.class_dim = -1}, LossSpec{.class_dim = 2, .label_smoothing = 0.2}}) {
    double uniform = 0;
    for (int r : {0, 2, 3, 4})
      for (int c = 0; c < 4; ++c) uniform += neg_log_prob6(r, c) / 16;
    const double want = (1 - spec.label_smoothing) * ce + spec.label_smoothing * uniform;
    const auto [rows, flat] = sequence_loss(spec, Dim::known(4), target);
    EXPECT_NEAR(rows, want, 1e-6);
    EXPECT_EQ(count_ops(*flat, "Transpose"), 0);
    EXPECT_EQ(count_ops(*flat, "Reshape"), 2);  // the scores and the target
    // An unknown class count: the classes are moved to dim 1 instead, for the same loss.
    const auto [moved, transposed] = sequence_loss(spec, Dim::named("classes"), target);
    EXPECT_NEAR(moved, want, 1e-6);
    EXPECT_EQ(count_ops(*transposed, "Transpose"), 1);
    EXPECT_EQ(count_ops(*transposed, "Reshape"), 0);
  }
}

}  // namespace
}  // namespace dprun
