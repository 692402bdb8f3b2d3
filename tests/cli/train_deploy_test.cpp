// The model `dprun train --save` writes is the one to serve: BatchNormalization on the trained
// running statistics, so each sample's output is PyTorch's eval-mode output whatever the batch
// (models/training/make_eval_reference.py made the reference from PyTorch's own training run).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <regex>
#include <string>
#include <vector>

#include "cli_test_util.h"
#include "engine/autograd/inference_graph.h"
#include "loader/npy.h"
#include "loader/onnx_loader.h"

namespace dprun::testing {
namespace {

namespace fs = std::filesystem;

// The largest |a - b| / (|b| + 1e-5) over the elements.
double max_relative_difference(const Tensor& a, const Tensor& b) {
  EXPECT_EQ(a.shape(), b.shape());
  double worst = 0;
  for (int64_t i = 0; i < std::min(a.numel(), b.numel()); ++i)
    worst = std::max(worst, std::abs(a.item_as_double(i) - b.item_as_double(i)) /
                                (std::abs(b.item_as_double(i)) + 1e-5));
  return worst;
}

// Rows [first, first + count) of a [N, ...] float32 tensor.
Tensor rows(const Tensor& t, int64_t first, int64_t count) {
  Shape shape = t.shape();
  shape[0] = count;
  const int64_t row = t.numel() / t.dim(0);
  std::vector<float> v(t.data<float>() + first * row, t.data<float>() + (first + count) * row);
  return Tensor::from_vector<float>(shape, v);
}

// The case's .args line with its data paths made absolute.
std::string case_args(const std::string& name) {
  std::string args = read_text(source_path("models/training/" + name + ".args"));
  args.erase(args.find_last_not_of(" \n") + 1);
  return std::regex_replace(args, std::regex("models/training/"),
                            source_path("models/training") + "/");
}

class TrainDeploy : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = scratch_path("dprun_train_deploy");
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // `dprun MODEL --input x=X` with `x` written to a file; the logits it writes.
  Tensor run_model(const std::string& model, const Tensor& x, std::string* output = nullptr) {
    const fs::path in = dir_ / "x.npy", out = dir_ / "out";
    write_npy(x, in.string());
    fs::remove_all(out);
    CommandResult r =
        run_dprun(model + " --input x=" + in.string() + " --output-dir " + out.string());
    EXPECT_EQ(r.status, 0) << r.output;
    if (output) *output = r.output;
    return read_npy((out / "logits.npy").string());
  }

  fs::path dir_;
};

TEST_F(TrainDeploy, TheSavedModelGivesPyTorchsEvalOutputOnOneSampleAndOnABatch) {
  const std::string data = source_path("models/training/cnn_bn_1dev");
  const std::string args = case_args("cnn_bn_1dev");
  const std::string saved = (dir_ / "served.onnx").string();
  CommandResult train = run_dprun("train " + data + ".onnx " + args + " --save " + saved);
  ASSERT_EQ(train.status, 0) << train.output;

  // The inference form: no training-mode node, the model's own inputs and outputs.
  std::shared_ptr<Graph> graph = load_graph(saved);
  EXPECT_TRUE(training_mode_nodes(*graph).empty());
  std::shared_ptr<Graph> original = load_graph(data + ".onnx");
  ASSERT_EQ(training_mode_nodes(*original).size(), 2u);  // it was exported for training
  ASSERT_EQ(graph->inputs.size(), 1u);
  EXPECT_EQ(graph->inputs[0].name, "x");
  ASSERT_EQ(graph->outputs.size(), 1u);
  EXPECT_EQ(graph->outputs[0].name, "logits");
  for (const Node& node : graph->nodes) {
    if (node.op_type == "BatchNormalization") {
      EXPECT_EQ(node.outputs.size(), 1u);
    }
  }

  const Tensor x = read_npy(data + ".x.npy");
  const Tensor want = read_npy(data + ".eval_logits.npy");
  // The trained parameters match PyTorch's at 1e-4 (train_references_test.cpp); the outputs
  // then agree about as closely.
  for (int64_t row : {0, 7, 19}) {
    SCOPED_TRACE("row " + std::to_string(row));
    EXPECT_LT(max_relative_difference(run_model(saved, rows(x, row, 1)), rows(want, row, 1)), 1e-3);
  }
  EXPECT_LT(max_relative_difference(run_model(saved, x), want), 1e-3);

  // The training form normalizes one sample by its own statistics: far from eval mode, and
  // `dprun run` says why.
  std::string output;
  const Tensor training_form = run_model(data + ".trained.onnx", rows(x, 0, 1), &output);
  EXPECT_GT(max_relative_difference(training_form, rows(want, 0, 1)), 0.1);
  EXPECT_NE(output.find("dprun: warning: " + data +
                        ".trained.onnx is in training form: 2 nodes ([BatchNormalization] node"),
            std::string::npos)
      << output;
}

// `dprun convert` gives PyTorch's own trained model (exported for training) its inference form:
// one sample, and the batch, give PyTorch's eval-mode logits to float32 rounding.
TEST_F(TrainDeploy, ConvertGivesATrainingExportPyTorchsEvalOutputs) {
  const std::string data = source_path("models/training/cnn_bn_1dev");
  const std::string served = (dir_ / "torch_eval.onnx").string();
  CommandResult convert = run_dprun("convert " + data + ".trained.onnx --save " + served);
  ASSERT_EQ(convert.status, 0) << convert.output;
  EXPECT_EQ(convert.output, data +
                                ".trained.onnx: 2 nodes switched to inference "
                                "(BatchNormalization on its running statistics, Dropout as "
                                "Identity); saved " +
                                served + "\n");
  const Tensor x = read_npy(data + ".x.npy");
  const Tensor want = read_npy(data + ".eval_logits.npy");
  EXPECT_LT(max_relative_difference(run_model(served, rows(x, 3, 1)), rows(want, 3, 1)), 1e-5);
  EXPECT_LT(max_relative_difference(run_model(served, x), want), 1e-5);
  CommandResult to_folder = run_dprun("convert " + data + ".trained.onnx --save " + dir_.string());
  EXPECT_EQ(to_folder.status, 1);
  EXPECT_EQ(to_folder.output,
            "dprun: error: --save " + dir_.string() + ": is a folder; give the file to write\n");
}

TEST_F(TrainDeploy, AModelExportedForInferenceTrainsWithFrozenStatisticsAndSaysSo) {
  const std::string data = source_path("models/training/cnn_bn_1dev");
  const std::string eval_form = (dir_ / "eval.onnx").string();
  save_graph(inference_graph(*load_graph(data + ".onnx")), {}, eval_form);
  const std::string args = case_args("cnn_bn_1dev");
  CommandResult train =
      run_dprun("train " + eval_form + " " + args + " --save " + (dir_ / "out.onnx").string());
  ASSERT_EQ(train.status, 0) << train.output;
  EXPECT_NE(train.output.find("note: " + eval_form +
                              " was exported for inference: its BatchNormalization nodes "
                              "normalize with their running statistics, which training leaves "
                              "as they are; to train them, export with torch.onnx.export(..., "
                              "training=torch.onnx.TrainingMode.TRAINING, "
                              "do_constant_folding=False)\n"),
            std::string::npos)
      << train.output;
  std::shared_ptr<Graph> before = load_graph(eval_form),
                         after = load_graph((dir_ / "out.onnx").string());
  for (const char* stat : {"bn1.running_mean", "bn1.running_var"}) {
    const Tensor &b = before->initializers.at(stat), &a = after->initializers.at(stat);
    EXPECT_EQ(std::vector<float>(a.data<float>(), a.data<float>() + a.numel()),
              std::vector<float>(b.data<float>(), b.data<float>() + b.numel()))
        << stat;
  }
}

}  // namespace
}  // namespace dprun::testing
