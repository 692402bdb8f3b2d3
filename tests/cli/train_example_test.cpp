// tools/examples/train_mlp.cpp, run as a user would: the loss falls over the steps on two CPU
// devices, with SGD and with Adam, in float32 and in mixed precision, and the saved model loads
// with the trained (float32) parameters; a run checkpointed and resumed ends as the run without
// a break, bit for bit.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <map>
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

// The loss text of each step's line, by step.
std::map<int, std::string> loss_lines(const std::string& output) {
  std::map<int, std::string> losses;
  std::regex line(R"(step (\d+) loss ([0-9.]+))");
  for (auto it = std::sregex_iterator(output.begin(), output.end(), line);
       it != std::sregex_iterator(); ++it)
    losses[std::stoi((*it)[1].str())] = (*it)[2].str();
  return losses;
}

// 8 steps in one run, and 4 steps checkpointed (every 3 steps and after the last) then resumed
// from the checkpoint for 4 more: the same losses from step 5 on and the same parameters, bit
// for bit (the optimizer's state, and float16's loss scale, come back with the checkpoint).
void expect_resume_equals_one_run(const std::string& optimizer, const std::string& precision) {
  fs::path dir = scratch_path("dprun_train_mlp_resume_" + optimizer + "_" + precision);
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::string model = source_path("models/mlp.onnx"),
                    tail = " " + optimizer + " " + precision;
  const fs::path whole = dir / "whole.onnx", first = dir / "first.onnx",
                 resumed = dir / "resumed.onnx";
  auto one = run_example(model + " " + whole.string() + " 8" + tail);
  ASSERT_EQ(one.status, 0) << one.output;
  auto part = run_example(model + " " + first.string() + " 4" + tail + " --checkpoint-every 3");
  ASSERT_EQ(part.status, 0) << part.output;
  const fs::path checkpoint = dir / "first.ckpt.onnx";
  EXPECT_NE(part.output.find("checkpoint " + checkpoint.string() + " at step 3\n"),
            std::string::npos)
      << part.output;
  EXPECT_NE(part.output.find("checkpoint " + checkpoint.string() + " at step 4\n"),
            std::string::npos)
      << part.output;
  auto rest = run_example(checkpoint.string() + " " + resumed.string() + " 8" + tail + " --resume");
  ASSERT_EQ(rest.status, 0) << rest.output;
  EXPECT_NE(rest.output.find("resuming " + checkpoint.string() + " at step 5\n"), std::string::npos)
      << rest.output;

  const std::map<int, std::string> whole_losses = loss_lines(one.output);
  const std::map<int, std::string> resumed_losses = loss_lines(rest.output);
  ASSERT_EQ(whole_losses.size(), 8u) << one.output;
  ASSERT_EQ(resumed_losses.size(), 4u) << rest.output;
  for (const auto& [step, loss] : resumed_losses) EXPECT_EQ(loss, whole_losses.at(step)) << step;

  const auto a = load_graph(whole.string()), b = load_graph(resumed.string());
  ASSERT_EQ(a->initializers.size(), b->initializers.size());
  for (const auto& [name, value] : a->initializers) {
    ASSERT_TRUE(b->initializers.count(name)) << name;
    const Tensor& other = b->initializers.at(name);
    ASSERT_EQ(other.shape(), value.shape()) << name;
    ASSERT_EQ(other.dtype(), value.dtype()) << name;
    EXPECT_EQ(std::memcmp(other.raw_data(), value.raw_data(), value.nbytes()), 0) << name;
  }
  fs::remove_all(dir);
}

TEST(TrainMlpExample, CheckpointedAndResumedEqualsOneRunBitForBit) {
  expect_resume_equals_one_run("sgd", "float32");
  expect_resume_equals_one_run("adam", "float16");
}

// The checkpoint keeps the settings that fix the arithmetic: another optimizer is refused.
TEST(TrainMlpExample, ResumeWithAnotherOptimizerIsRefused) {
  fs::path dir = scratch_path("dprun_train_mlp_resume_refused");
  fs::remove_all(dir);
  fs::create_directories(dir);
  const fs::path out = dir / "out.onnx", checkpoint = dir / "out.ckpt.onnx";
  auto part = run_example(source_path("models/mlp.onnx") + " " + out.string() +
                          " 2 sgd float32 --checkpoint-every 2");
  ASSERT_EQ(part.status, 0) << part.output;
  auto r = run_example(checkpoint.string() + " " + out.string() + " 4 adam float32 --resume");
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.output.find("error: " + checkpoint.string() +
                          ": was trained with --optimizer sgd; resume with the same --optimizer "
                          "(got adam)\n"),
            std::string::npos)
      << r.output;
  fs::remove_all(dir);
}

TEST(TrainMlpExample, UsageError) {
  for (const char* arguments : {"", "m.onnx out.onnx 4 --checkpoint-every 0", "m.onnx --resume"}) {
    auto r = run_example(arguments);
    EXPECT_EQ(r.status, 2) << arguments;
    EXPECT_NE(r.output.find("usage: "), std::string::npos) << r.output;
  }
}

}  // namespace
}  // namespace dprun::testing
