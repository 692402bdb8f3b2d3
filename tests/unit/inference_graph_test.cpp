// The inference form of a training export (engine/autograd/inference_graph.h): what --save
// writes and validation runs, checked against eval-mode math computed by hand.
#include <gtest/gtest.h>

#include <cmath>

#include "engine/autograd/inference_graph.h"
#include "engine/model.h"
#include "error_test_util.h"
#include "graph_test_util.h"

namespace dprun::testing {
namespace {

constexpr float kEpsilon = 1e-5f;

// x [N, 2, 1, 2] -> BatchNormalization in training mode -> y, at `opset`: training_mode=1
// from 14, the statistics as extra outputs before.
std::shared_ptr<Graph> batch_norm_graph(int64_t opset, std::vector<std::string> outputs) {
  auto g = std::make_shared<Graph>();
  g->opset_imports[""] = opset;
  g->inputs.push_back({"x", {DType::Float32, std::nullopt}});
  g->initializers["scale"] = Tensor::from_vector<float>({2}, {1.5f, -0.5f});
  g->initializers["bias"] = Tensor::from_vector<float>({2}, {0.25f, 2.0f});
  g->initializers["mean"] = Tensor::from_vector<float>({2}, {0.5f, -1.0f});
  g->initializers["var"] = Tensor::from_vector<float>({2}, {4.0f, 0.25f});
  Node bn = make_node("BatchNormalization", {"x", "scale", "bias", "mean", "var"}, outputs);
  bn.name = "bn";
  bn.attributes["epsilon"] = Attribute::of_float(kEpsilon);
  if (opset >= 14) bn.attributes["training_mode"] = Attribute::of_int(1);
  g->nodes.push_back(bn);
  g->outputs.push_back({"y", {}});
  for (const auto& o : outputs)
    if (o != "y") g->state_updates[o] = o == outputs[1] ? "mean" : "var";
  return g;
}

// Eval-mode BatchNormalization of one [1, 2, 1, 2] sample, by hand.
std::vector<float> eval_batch_norm(const std::vector<float>& x) {
  const float scale[] = {1.5f, -0.5f}, bias[] = {0.25f, 2.0f}, mean[] = {0.5f, -1.0f},
              var[] = {4.0f, 0.25f};
  std::vector<float> y;
  for (size_t i = 0; i < x.size(); ++i) {
    const size_t c = i / 2;
    y.push_back((x[i] - mean[c]) / std::sqrt(var[c] + kEpsilon) * scale[c] + bias[c]);
  }
  return y;
}

TEST(InferenceGraph, BatchNormalizationUsesItsRunningStatisticsOnOneSample) {
  for (int64_t opset : {9, 12, 15}) {
    SCOPED_TRACE("opset " + std::to_string(opset));
    auto training = opset >= 14 ? batch_norm_graph(opset, {"y", "running_mean", "running_var"})
                                : batch_norm_graph(opset, {"y", "running_mean", "running_var",
                                                           "saved_mean", "saved_var"});
    ASSERT_EQ(training_mode_nodes(*training),
              std::vector<std::string>{"[BatchNormalization] node 'bn'"});
    auto eval = std::make_shared<Graph>(inference_graph(*training));
    EXPECT_TRUE(training_mode_nodes(*eval).empty());
    ASSERT_EQ(eval->nodes.size(), 1u);
    EXPECT_EQ(eval->nodes[0].outputs, std::vector<std::string>{"y"});
    EXPECT_FALSE(eval->nodes[0].has_attr("training_mode"));
    EXPECT_TRUE(eval->state_updates.empty());
    // One sample: training mode would normalize it with its own statistics (a constant
    // output per channel); inference mode gives the running statistics' affine map.
    const std::vector<float> x = {3.0f, -2.0f, 0.0f, 1.0f};
    Model model(eval, Device::cpu());
    Tensor y = model.run(std::vector<Tensor>{Tensor::from_vector<float>({1, 2, 1, 2}, x)})[0];
    const std::vector<float> want = eval_batch_norm(x);
    for (size_t i = 0; i < want.size(); ++i)
      EXPECT_NEAR(y.data<float>()[i], want[i], 1e-6f) << "element " << i;
  }
}

TEST(InferenceGraph, AReaderOfTheUpdatedRunningMeanReadsTheRunningMean) {
  auto g = batch_norm_graph(15, {"y", "running_mean", "running_var"});
  g->nodes.push_back(make_node("Identity", {"running_mean"}, {"mean_copy"}));
  g->outputs.push_back({"mean_copy", {}});
  g->outputs.push_back({"running_var", {}});  // a training-only output: dropped
  Graph eval = inference_graph(*g);
  ASSERT_EQ(eval.nodes.size(), 2u);
  EXPECT_EQ(eval.nodes[1].inputs, std::vector<std::string>{"mean"});
  ASSERT_EQ(eval.outputs.size(), 2u);
  EXPECT_EQ(eval.outputs[0].name, "y");
  EXPECT_EQ(eval.outputs[1].name, "mean_copy");
}

TEST(InferenceGraph, AReaderOfASavedBatchStatisticIsRefused) {
  auto g = batch_norm_graph(12, {"y", "rm", "rv", "saved_mean", "saved_var"});
  Node reader = make_node("Identity", {"saved_mean"}, {"m"});
  reader.name = "reader";
  g->nodes.push_back(reader);
  g->outputs.push_back({"m", {}});
  EXPECT_EQ(error_of([&] { inference_graph(*g); }),
            "[Identity] node 'reader': reads 'saved_mean', a batch statistic that only training "
            "computes: the model has no inference form");
}

// x -> Dropout(ratio, training_mode = Constant true) -> y, as a training export writes it.
std::shared_ptr<Graph> dropout_graph(bool mask_read) {
  auto g = std::make_shared<Graph>();
  g->opset_imports[""] = 15;
  g->inputs.push_back({"x", {DType::Float32, std::nullopt}});
  g->initializers["ratio"] = Tensor::scalar<float>(0.5f);
  g->nodes.push_back(constant_node("train", Tensor::scalar<bool>(true)));
  Node drop = make_node("Dropout", {"x", "ratio", "train"}, {"y", "mask"});
  drop.name = "drop";
  g->nodes.push_back(drop);
  g->outputs.push_back({"y", {}});
  if (mask_read) {
    Node cast = make_node("Cast", {"mask"}, {"kept"});
    cast.attributes["to"] = Attribute::of_int(static_cast<int64_t>(DType::Float32));
    g->nodes.push_back(cast);
    g->outputs.push_back({"kept", {}});
  } else {
    g->outputs.push_back({"mask", {}});  // a training-only output: dropped
  }
  return g;
}

TEST(InferenceGraph, DropoutBecomesIdentityAndItsSwitchGoes) {
  auto g = dropout_graph(false);
  ASSERT_EQ(training_mode_nodes(*g), std::vector<std::string>{"[Dropout] node 'drop'"});
  auto eval = std::make_shared<Graph>(inference_graph(*g));
  ASSERT_EQ(eval->nodes.size(), 1u);  // the Constant nothing reads any more is gone
  EXPECT_EQ(eval->nodes[0].op_type, "Identity");
  EXPECT_EQ(eval->nodes[0].name, "drop");
  EXPECT_TRUE(eval->initializers.empty());
  ASSERT_EQ(eval->outputs.size(), 1u);
  EXPECT_EQ(eval->outputs[0].name, "y");
  Model model(eval, Device::cpu());
  Tensor x = Tensor::from_vector<float>({2, 3}, {1, 2, 3, 4, 5, 6});
  Tensor y = model.run(std::vector<Tensor>{x})[0];
  EXPECT_EQ(values_of<float>(y), values_of<float>(x));
}

TEST(InferenceGraph, ADropoutWhoseMaskIsReadRunsInInferenceMode) {
  auto eval = std::make_shared<Graph>(inference_graph(*dropout_graph(true)));
  ASSERT_EQ(eval->nodes.size(), 2u);
  EXPECT_EQ(eval->nodes[0].op_type, "Dropout");
  EXPECT_EQ(eval->nodes[0].inputs, (std::vector<std::string>{"x", "ratio"}));
  EXPECT_TRUE(training_mode_nodes(*eval).empty());
  Model model(eval, Device::cpu());
  auto out = model.run(std::vector<Tensor>{Tensor::from_vector<float>({4}, {1, 2, 3, 4})});
  EXPECT_EQ(values_of<float>(out[0]), (std::vector<float>{1, 2, 3, 4}));
  EXPECT_EQ(values_of<float>(out[1]), (std::vector<float>{1, 1, 1, 1}));
}

TEST(InferenceGraph, AnInferenceGraphIsLeftAsItIs) {
  auto g = batch_norm_graph(15, {"y"});
  g->nodes[0].attributes.erase("training_mode");
  EXPECT_TRUE(training_mode_nodes(*g).empty());
  Graph eval = inference_graph(*g);
  ASSERT_EQ(eval.nodes.size(), 1u);
  EXPECT_EQ(eval.nodes[0].attributes.size(), g->nodes[0].attributes.size());
  EXPECT_EQ(eval.initializers.size(), 4u);
}

}  // namespace
}  // namespace dprun::testing
