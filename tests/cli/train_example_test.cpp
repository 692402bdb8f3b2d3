// tools/examples/train_mlp.cpp, run as a user would: the loss falls over the steps on two CPU
// devices, with SGD and with Adam, in float32 and in mixed precision, and the saved model loads
// with the trained (float32) parameters.
#include <gtest/gtest.h>

#include <filesystem>
#include <regex>
#include <string>
#include <vector>

#include "cli_test_util.h"
#include "loader/onnx_loader.h"

namespace dprun::testing {
namespace {

namespace fs = std::filesystem;

CommandResult run_example(const std::string& arguments) {
  return run_shell(std::string(DPRUN_TRAIN_MLP_EXAMPLE) + " " + arguments);
}

std::vector<double> step_losses(const std::string& output) {
  std::vector<double> losses;
  std::regex line(R"(step (\d+) loss ([0-9.]+))");
  for (auto it = std::sregex_iterator(output.begin(), output.end(), line);
       it != std::sregex_iterator(); ++it) {
    EXPECT_EQ(std::stoul((*it)[1].str()), losses.size() + 1);
    losses.push_back(std::stod((*it)[2].str()));
  }
  return losses;
}

void expect_trains(const std::string& optimizer, const std::string& precision = "float32") {
  fs::path dir = scratch_path("dprun_train_mlp_example_" + optimizer + "_" + precision);
  fs::remove_all(dir);
  fs::create_directories(dir);
  fs::path out = dir / "trained.onnx";
  std::string model = source_path("models/mlp.onnx");
  auto r = run_example(model + " " + out.string() + " 12 " + optimizer + " " + precision);
  ASSERT_EQ(r.status, 0) << r.output;
  std::vector<double> losses = step_losses(r.output);
  ASSERT_EQ(losses.size(), 12u) << r.output;
  EXPECT_EQ(r.output.find("skipped"), std::string::npos) << r.output;
  // The mean of the last four steps (the last pass over the four batches) against the first.
  double last = (losses[8] + losses[9] + losses[10] + losses[11]) / 4;
  EXPECT_LT(last, 0.9 * losses[0]) << r.output;
  EXPECT_NE(r.output.find("saved " + out.string()), std::string::npos) << r.output;

  auto before = load_graph(model);
  auto after = load_graph(out.string());
  ASSERT_EQ(after->initializers.size(), before->initializers.size());
  for (const auto& [name, original] : before->initializers) {
    ASSERT_TRUE(after->initializers.count(name)) << name;
    const Tensor& trained = after->initializers.at(name);
    ASSERT_EQ(trained.shape(), original.shape()) << name;
    ASSERT_EQ(trained.dtype(), original.dtype()) << name;
    bool moved = false;
    for (int64_t i = 0; i < original.numel() && !moved; ++i)
      moved = trained.item_as_double(i) != original.item_as_double(i);
    EXPECT_TRUE(moved) << name << " was not trained";
  }
  Model loaded = load_model(out.string(), Device::cpu(0));
  EXPECT_EQ(loaded.input_names(), std::vector<std::string>{"input"});
  fs::remove_all(dir);
}

TEST(TrainMlpExample, SgdLossFallsAndTheSavedModelLoads) {
  expect_trains("sgd");
}

TEST(TrainMlpExample, AdamLossFallsAndTheSavedModelLoads) {
  expect_trains("adam");
}

// The MLP's gradients stay far below float16's range at the default scale: no step is skipped.
TEST(TrainMlpExample, MixedPrecisionLossFallsAndTheSavedModelLoads) {
  expect_trains("sgd", "bfloat16");
  expect_trains("adam", "float16");
}

TEST(TrainMlpExample, UsageError) {
  auto r = run_example("");
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.output.find("usage: "), std::string::npos) << r.output;
}

}  // namespace
}  // namespace dprun::testing
