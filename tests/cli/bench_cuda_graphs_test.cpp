// `dprun bench` under DPRUN_CUDA_GRAPHS=1 says what the graphs did (engine/plan_graphs.h): a
// line with the captures, replays and fallbacks of every replica, and the same counts in its
// --json report. The simulated devices capture as a GPU does; CPU devices never do.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "cli_test_util.h"

namespace dprun::testing {
namespace {

namespace fs = std::filesystem;

struct GraphBench {
  CommandResult result;
  nlohmann::json report;
};

// `dprun bench models/cnn.onnx --devices DEVICES` for 2 warm-up and 5 timed steps, with the
// switch set to `graphs`.
GraphBench bench_cnn(const std::string& devices, bool graphs) {
  const fs::path json = scratch_path("bench_cuda_graphs.json");
  fs::remove(json);
  GraphBench run{run_shell(std::string(graphs ? "DPRUN_CUDA_GRAPHS=1 " : "") + DPRUN_BINARY +
                           " bench " + source_path("models/cnn.onnx") + " --devices " + devices +
                           " --batch 2 --warmup 2 --iters 5 --json " + json.string()),
                 nullptr};
  run.report = read_json(json);
  fs::remove(json);
  return run;
}

// Each replica's 7 runs: a warm-up run, the run that captures, then 5 replays.
TEST(BenchCudaGraphs, CountsEveryReplicasCapturesAndReplays) {
  const GraphBench two = bench_cnn("sim:0,sim:1", true);
  ASSERT_EQ(two.result.status, 0) << two.result.output;
  EXPECT_NE(two.result.output.find("CUDA graphs: 2 captured, 10 replays, 0 fallbacks\n"),
            std::string::npos)
      << two.result.output;
  EXPECT_EQ(
      two.report["cuda_graphs"],
      (nlohmann::json{{"captures", 2}, {"replays", 10}, {"fallbacks", 0}, {"last_fallback", ""}}));
  // One device runs the model itself, without replicas.
  const GraphBench one = bench_cnn("sim:0", true);
  ASSERT_EQ(one.result.status, 0) << one.result.output;
  EXPECT_EQ(one.report["cuda_graphs"]["captures"], 1);
  EXPECT_EQ(one.report["cuda_graphs"]["replays"], 5);
}

TEST(BenchCudaGraphs, SaysNothingWithoutTheSwitchOrOnCpuDevices) {
  for (const auto& [devices, graphs] : {std::pair{"sim:0", false}, std::pair{"cpu:0", true}}) {
    const GraphBench run = bench_cnn(devices, graphs);
    ASSERT_EQ(run.result.status, 0) << run.result.output;
    EXPECT_EQ(run.result.output.find("CUDA graphs"), std::string::npos) << run.result.output;
    EXPECT_FALSE(run.report.contains("cuda_graphs")) << devices;
  }
}

}  // namespace
}  // namespace dprun::testing
