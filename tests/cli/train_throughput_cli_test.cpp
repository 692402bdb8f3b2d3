// `dprun train --warmup-steps`: the reported samples/s leaves out the first steps, and the
// --json file carries both figures and every step's time.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "cli_test_util.h"

namespace dprun::testing {
namespace {

namespace fs = std::filesystem;

// mlp_sgd: 25 rows in batches of 10, so 4 steps take 10, 10, 5 and 10 rows.
const std::vector<double> kRows = {10, 10, 5, 10};

struct TrainJson {
  nlohmann::json report;
  std::vector<double> step_seconds;  // each step's seconds and its wait for data
  double samples_per_s = 0, samples_per_s_overall = 0;
  int warmup_steps = -1;
};

TrainJson train(const std::string& extra, const std::string& tag) {
  fs::path dir = scratch_path("dprun_train_throughput_" + tag);
  fs::remove_all(dir);
  fs::create_directories(dir);
  std::string data = source_path("models/training/mlp_sgd");
  auto r =
      run_dprun("train " + data + ".onnx --input x=" + data + ".x.npy --target " + data +
                ".target.npy --loss cross_entropy --optimizer sgd --lr 0.1 --batch 10 " +
                "--steps 4 --no-shuffle --devices cpu:0 --save " + (dir / "out.onnx").string() +
                " --json " + (dir / "run.json").string() + " " + extra);
  EXPECT_EQ(r.status, 0) << r.output;
  TrainJson out;
  out.report = read_json(dir / "run.json");
  out.step_seconds = numbers(out.report, "step_seconds").value_or(std::vector<double>{});
  // A step's time in the rates: its own and the time it waited for its batches.
  const std::vector<double> waits =
      numbers(out.report, "data_wait_seconds").value_or(std::vector<double>{});
  EXPECT_EQ(waits.size(), out.step_seconds.size()) << out.report;
  for (size_t i = 0; i < waits.size() && i < out.step_seconds.size(); ++i)
    out.step_seconds[i] += waits[i];
  out.samples_per_s = out.report.at("samples_per_s").get<double>();
  out.samples_per_s_overall = out.report.at("samples_per_s_overall").get<double>();
  out.warmup_steps = out.report.at("warmup_steps").get<int>();
  fs::remove_all(dir);
  return out;
}

// How near a rate computed here from the JSON's step seconds is to the JSON's own: the report
// gives each figure to 9 significant digits or more (each within 5e-9 of dprun's value, so a
// rate of them within 1e-8); checked at 1e-7 relative.
constexpr double kRateTolerance = 1e-7;

// Rows over seconds of steps [first, 4), from the seconds as the JSON gives them.
double expected_rate(const std::vector<double>& seconds, size_t first) {
  double rows = 0, total = 0;
  for (size_t i = first; i < seconds.size(); ++i) {
    rows += kRows[i];
    total += seconds[i];
  }
  return rows / total;
}

TEST(TrainThroughputCli, DefaultLeavesOutTheFirstStep) {
  TrainJson j = train("", "default");
  ASSERT_EQ(j.step_seconds.size(), 4u) << j.report;
  EXPECT_EQ(j.warmup_steps, 1);
  EXPECT_NEAR(j.samples_per_s, expected_rate(j.step_seconds, 1), kRateTolerance * j.samples_per_s);
  EXPECT_NEAR(j.samples_per_s_overall, expected_rate(j.step_seconds, 0),
              kRateTolerance * j.samples_per_s_overall);
}

TEST(TrainThroughputCli, WarmupStepsAreLeftOut) {
  TrainJson j = train("--warmup-steps 2", "two");
  ASSERT_EQ(j.step_seconds.size(), 4u) << j.report;
  EXPECT_EQ(j.warmup_steps, 2);
  EXPECT_NEAR(j.samples_per_s, expected_rate(j.step_seconds, 2), kRateTolerance * j.samples_per_s);
  EXPECT_NEAR(j.samples_per_s_overall, expected_rate(j.step_seconds, 0),
              kRateTolerance * j.samples_per_s_overall);
}

TEST(TrainThroughputCli, NoWarmupGivesTheOverallFigure) {
  TrainJson j = train("--warmup-steps 0", "zero");
  EXPECT_EQ(j.warmup_steps, 0);
  EXPECT_EQ(j.samples_per_s, j.samples_per_s_overall) << j.report;
}

TEST(TrainThroughputCli, AsManyWarmupStepsAsStepsGivesTheOverallFigure) {
  TrainJson j = train("--warmup-steps 4", "all");
  EXPECT_EQ(j.warmup_steps, 0);
  EXPECT_EQ(j.samples_per_s, j.samples_per_s_overall) << j.report;
}

TEST(TrainThroughputCli, PrintsBothFigures) {
  std::string data = source_path("models/training/mlp_sgd");
  fs::path dir = scratch_path("dprun_train_throughput_print");
  fs::create_directories(dir);
  fs::path out = dir / "out.onnx";
  auto r = run_dprun("train " + data + ".onnx --input x=" + data + ".x.npy --target " + data +
                     ".target.npy --loss cross_entropy --optimizer sgd --lr 0.1 --batch 10 " +
                     "--steps 3 --devices cpu:0 --warmup-steps 2 --save " + out.string());
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_TRUE(std::regex_search(
      r.output, std::regex(R"(last batch loss [0-9.]+, [0-9.]+ samples/s after 2 warm-up steps )"
                           R"(\([0-9.]+ overall\); saved )")))
      << r.output;
  fs::remove_all(dir);
}

TEST(TrainThroughputCli, NegativeWarmupIsAUsageError) {
  std::string data = source_path("models/training/mlp_sgd");
  auto r = run_dprun("train " + data + ".onnx --input x=" + data + ".x.npy --target " + data +
                     ".target.npy --loss cross_entropy --optimizer sgd --lr 0.1 --batch 10 " +
                     "--steps 3 --warmup-steps -1 --save /tmp/unused.onnx");
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.output.find("--warmup-steps must be between 0 and"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace dprun::testing
