// The timing arithmetic of `dprun bench`: nearest-rank percentiles of step times, the best of
// several rounds, and rounds of a real DataParallel run recorded step by step.
#include "tools/bench_rounds.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "loader/onnx_loader.h"
#include "op_test_util.h"

namespace dprun::cli {
namespace {

std::string bundled_model(const std::string& name) {
  const char* root = std::getenv("DPRUN_SOURCE_DIR");
  return std::string(root ? root : DPRUN_SOURCE_DIR_DEFAULT) + "/models/" + name + ".onnx";
}

TEST(StepSpread, NearestRankPercentiles) {
  // Ten steps: the 1st, 5th and 9th smallest.
  StepSpread s = step_spread({5, 1, 4, 2, 3, 10, 9, 8, 7, 6});
  EXPECT_EQ(s.steps, 10u);
  EXPECT_EQ(s.p10, 1);
  EXPECT_EQ(s.median, 5);
  EXPECT_EQ(s.p90, 9);
  // Three steps: ranks ceil(0.3) = 1, ceil(1.5) = 2, ceil(2.7) = 3.
  s = step_spread({0.3, 0.1, 0.2});
  EXPECT_EQ(s.p10, 0.1);
  EXPECT_EQ(s.median, 0.2);
  EXPECT_EQ(s.p90, 0.3);
  s = step_spread({0.25});
  EXPECT_EQ(s.steps, 1u);
  EXPECT_EQ(s.p10, 0.25);
  EXPECT_EQ(s.median, 0.25);
  EXPECT_EQ(s.p90, 0.25);
  s = step_spread({});
  EXPECT_EQ(s.steps, 0u);
  EXPECT_EQ(s.median, 0);
}

TEST(BenchResult, KeepsTheFastestRoundAndPoolsTheStepsOfAll) {
  BenchResult result;
  result.rounds.push_back({.samples_per_s = 100, .ms_per_iter = 10, .step_ms = {9, 11}});
  result.rounds.push_back({.samples_per_s = 125, .ms_per_iter = 8, .step_ms = {8, 8}});
  result.rounds.push_back({.samples_per_s = 90, .ms_per_iter = 11, .step_ms = {10, 12}});
  EXPECT_EQ(&result.best(), &result.rounds[1]);
  StepSpread s = result.spread();  // of 8 8 9 10 11 12: ranks 1, 3, 6
  EXPECT_EQ(s.steps, 6u);
  EXPECT_EQ(s.p10, 8);
  EXPECT_EQ(s.median, 9);
  EXPECT_EQ(s.p90, 12);
}

TEST(DeviceListBench, EachRoundRecordsEveryStepAndEachDevicesRows) {
  auto model = std::make_shared<Model>(load_model(bundled_model("mlp"), Device::cpu(0)));
  DataParallelOptions options;
  options.device_ids = {Device::cpu(0), Device::cpu(1)};
  options.threads = 1;
  std::vector<Tensor> inputs = {testing::random_floats({6, 784}, 7)};
  DeviceListBench bench(model, options, inputs);
  bench.warm(1, "warm-up");
  EXPECT_TRUE(bench.result().rounds.empty());
  bench.time_round(4, "bench");
  bench.time_round(3, "bench");
  const BenchResult& result = bench.result();
  ASSERT_EQ(result.rounds.size(), 2u);
  EXPECT_EQ(result.devices, options.device_ids);
  for (size_t r = 0; r < 2; ++r) {
    const RoundResult& round = result.rounds[r];
    ASSERT_EQ(round.step_ms.size(), r == 0 ? 4u : 3u);
    double sum = 0;
    for (double ms : round.step_ms) {
      EXPECT_GT(ms, 0);
      sum += ms;
    }
    const double steps = static_cast<double>(round.step_ms.size());
    EXPECT_DOUBLE_EQ(round.ms_per_iter, sum / steps);
    EXPECT_EQ(round.rows_per_step, 6);  // the rows the steps ran, over both devices
    EXPECT_DOUBLE_EQ(round.samples_per_s, 6 * steps / (sum * 1e-3));
    ASSERT_EQ(round.per_device.size(), 2u);
    EXPECT_EQ(round.per_device[0].device, Device::cpu(0));
    EXPECT_EQ(round.per_device[0].rows, 3);
    EXPECT_EQ(round.per_device[1].device, Device::cpu(1));
    EXPECT_EQ(round.per_device[1].rows, 3);
    EXPECT_GT(round.per_device[1].busy_ms, 0);
  }
  EXPECT_EQ(result.spread().steps, 7u);
  EXPECT_DOUBLE_EQ(result.median_samples_per_s(), 6 / (result.spread().median * 1e-3));
}

}  // namespace
}  // namespace dprun::cli
