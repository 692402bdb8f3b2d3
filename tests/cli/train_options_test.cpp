// `dprun train`'s learning-rate schedule and gradient clipping options: each bad value is a
// usage error naming it, and a run reports what it used in --json. Their values against
// PyTorch's are checked by the models/training cases mlp_warmup_cosine_dp2, mlp_step_adam and
// mlp_clip_dp3 (tests/cli/train_references_test.cpp).
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "cli_test_util.h"

namespace dprun::testing {
namespace {

namespace fs = std::filesystem;

/// `dprun train` on the mlp_sgd data, 4 steps of SGD with lr 0.1 on cpu:0, writing into `dir`.
std::string train_command(const fs::path& dir, const std::string& more) {
  const std::string data = source_path("models/training/mlp_sgd");
  return "train " + data + ".onnx --input x=" + data + ".x.npy --target " + data +
         ".target.npy --loss cross_entropy --optimizer sgd --lr 0.1 --batch 10 --steps 4 "
         "--no-shuffle --devices cpu:0 --save " +
         (dir / "out.onnx").string() + " --json " + (dir / "run.json").string() + more;
}

TEST(TrainOptions, BadSchedulesAndClippingAreUsageErrors) {
  const fs::path dir = scratch_path("dprun_train_options_errors");
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::vector<std::pair<std::string, std::string>> errors = {
      {" --lr-schedule cosin",
       "--lr-schedule: lr schedule 'cosin' is not constant, step:SIZE[:GAMMA], "
       "exponential:GAMMA, cosine[:ETA_MIN] or linear[:END_FACTOR]"},
      {" --lr-schedule step:0",
       "--lr-schedule: lr schedule 'step:0': the step size is not a "
       "positive whole number"},
      {" --lr-warmup -1", "--lr-warmup must be between 0 and 1099511627776, got -1"},
      {" --lr-warmup-start 0.5", "--lr-warmup-start needs --lr-warmup N"},
      {" --lr-warmup 2 --lr-warmup-start 0", "--lr-warmup-start: 0 is not in (0, 1]"},
      {" --clip-grad-norm 0", "--clip-grad-norm: 0 is not a positive number"},
      {" --clip-grad-norm inf", "--clip-grad-norm must be a number, got 'inf'"},
  };
  for (const auto& [options, message] : errors) {
    SCOPED_TRACE(options);
    expect_usage_error(run_dprun(train_command(dir, options)), message);
    EXPECT_FALSE(fs::exists(dir / "out.onnx")) << "a usage error left a model behind";
  }
  fs::remove_all(dir);
}

// Without a schedule every step has the given lr and no grad_norms are listed; with one, the
// JSON lists each step's lr (StepLR: halved every 2 steps) and, with clipping, each norm.
TEST(TrainOptions, TheJsonListsEachStepsLearningRateAndNorm) {
  const fs::path dir = scratch_path("dprun_train_options_json");
  fs::remove_all(dir);
  fs::create_directories(dir);
  CommandResult r = run_dprun(train_command(dir, ""));
  ASSERT_EQ(r.status, 0) << r.output;
  std::string json = read_text(dir / "run.json");
  EXPECT_EQ(json_numbers(json, "lrs"), std::vector<double>(4, 0.1)) << json;
  EXPECT_EQ(json_numbers(json, "grad_norms"), std::nullopt) << json;

  r = run_dprun(train_command(dir, " --lr-schedule step:2:0.5 --clip-grad-norm 0.25"));
  ASSERT_EQ(r.status, 0) << r.output;
  json = read_text(dir / "run.json");
  EXPECT_EQ(json_numbers(json, "lrs"), (std::vector<double>{0.1, 0.1, 0.05, 0.05})) << json;
  const std::vector<double> norms =
      json_numbers(json, "grad_norms").value_or(std::vector<double>{});
  ASSERT_EQ(norms.size(), 4u) << json;
  for (double norm : norms) EXPECT_GT(norm, 0.25) << "the case clips every step: " << json;
  fs::remove_all(dir);
}

}  // namespace
}  // namespace dprun::testing
