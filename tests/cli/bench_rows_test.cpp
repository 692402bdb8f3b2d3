// `dprun bench` counts the rows each step ran: samples/s from the --input files' rows or the
// model's fixed batch, not from --batch; a --batch the model cannot take is named in one
// warning; the --sweep table's speed-up compares the median step times it shows.
#include <gtest/gtest.h>

#include <filesystem>
#include <regex>
#include <string>

#include "cli_test_util.h"
#include "engine/graph.h"
#include "loader/onnx_loader.h"

namespace dprun::testing {
namespace {

namespace fs = std::filesystem;

// y = Relu(x) for x: float32[1, 3], a batch fixed at 1 as a model exported without
// dynamic_axes has it.
std::string write_fixed_batch_model(const fs::path& path) {
  Graph g;
  g.name = "fixed_batch";
  g.opset_imports[""] = 13;
  g.inputs.push_back({"x", {DType::Float32, SymbolicShape{Dim::known(1), Dim::known(3)}}});
  Node relu;
  relu.name = "relu";
  relu.op_type = "Relu";
  relu.inputs = {"x"};
  relu.outputs = {"y"};
  g.nodes = {relu};
  g.outputs.push_back({"y", {DType::Float32, SymbolicShape{Dim::known(1), Dim::known(3)}}});
  save_graph(g, {}, path.string());
  return path.string();
}

struct BenchRun {
  CommandResult result;
  nlohmann::json report;  // what --json wrote
};

// `dprun bench ARGS --json FILE`, and the report it wrote.
BenchRun bench_with_json(const std::string& args) {
  const fs::path json = scratch_path("bench_rows.json");
  fs::remove(json);
  BenchRun run{run_dprun("bench " + args + " --json " + json.string()), nullptr};
  run.report = read_json(json);
  fs::remove(json);
  return run;
}

// samples_per_s is rows * 1000 / ms_per_iter, within the rounding of the digits the report
// gives them (9 significant digits or more).
void expect_rate_of_rows(const nlohmann::json& report, double rows) {
  const double ms = report.at("ms_per_iter").get<double>();
  EXPECT_NEAR(report.at("samples_per_s").get<double>(), rows * 1e3 / ms, 1e-6 * rows * 1e3 / ms)
      << report;
}

TEST(BenchRows, SamplesPerSecondCountTheRowsOfTheInputFiles) {
  // The file holds 4 rows; without --batch bench ran them but counted 1 before.
  auto [r, report] =
      bench_with_json(source_path("models/mlp.onnx") + " --devices cpu:0 --input input=" +
                      source_path("models/mlp.input.input.npy") + " --iters 5");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_EQ(
      r.output.rfind(
          "model " + source_path("models/mlp.onnx") + ", batch 4, 5 iterations (+3 warm-up)\n", 0),
      0u)
      << r.output;
  EXPECT_EQ(report.at("batch"), 4) << report;
  expect_rate_of_rows(report, 4);
  // The headline line agrees: MS ms per iteration, 4 * 1000 / MS samples/s.
  std::smatch m;
  ASSERT_TRUE(std::regex_search(
      r.output, m, std::regex(R"(\n([0-9.]+) ms per iteration, ([0-9.]+) samples/s\n$)")));
  EXPECT_NEAR(std::stod(m[2].str()), 4e3 / report.at("ms_per_iter").get<double>(),
              0.05 + 1e-4 * std::stod(m[2].str()));

  // With the files, a --batch that differs is named as ignored.
  r = run_dprun("bench " + source_path("models/mlp.onnx") + " --devices cpu:0 --input input=" +
                source_path("models/mlp.input.input.npy") + " --iters 2 --batch 8");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_EQ(r.output.rfind("dprun: warning: --batch 8 ignored: the inputs have no generated batch "
                           "dim, each step runs 4 rows (the rows of the --input files)\nmodel ",
                           0),
            0u)
      << r.output;
}

TEST(BenchRows, AFixedBatchModelSaysBatchIsIgnoredAndCountsItsOneRow) {
  const std::string model = write_fixed_batch_model(scratch_path("fixed_batch.onnx"));
  auto [r, report] = bench_with_json(model + " --devices cpu:0 --batch 4 --iters 3");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_EQ(r.output.rfind("dprun: warning: " + model +
                               " has a fixed batch of 1: --batch 4 ignored, each step runs 1 "
                               "row\nmodel " +
                               model + ", batch 1, 3 iterations (+3 warm-up)\n",
                           0),
            0u)
      << r.output;
  EXPECT_EQ(report.at("batch"), 1) << report;
  expect_rate_of_rows(report, 1);
  // The batch it has is no warning.
  r = run_dprun("bench " + model + " --devices cpu:0 --batch 1 --iters 2");
  EXPECT_EQ(r.output.find("warning"), std::string::npos) << r.output;
  fs::remove(model);
}

TEST(BenchRows, GeneratedInputsCountTheirBatch) {
  auto [r, report] = bench_with_json(source_path("models/mlp.onnx") +
                                     " --devices cpu:0,cpu:1 --batch 6 --iters 4");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_EQ(report.at("batch"), 6) << report;
  expect_rate_of_rows(report, 6);
  EXPECT_NE(r.output.find("cpu:0             3 "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("cpu:1             3 "), std::string::npos) << r.output;
}

TEST(BenchRows, SweepSpeedUpComparesTheMedianStepTimesItShows) {
  auto [r, report] = bench_with_json(source_path("models/mlp.onnx") +
                                     " --devices cpu:0,cpu:1 --batch 8 --iters 6 --sweep");
  ASSERT_EQ(r.status, 0) << r.output;
  // Each sweep entry, of 1 then 2 devices: median_samples_per_s is 8 rows over its median step,
  // and the speed-up the ratio of those to one device's.
  ASSERT_TRUE(report.contains("sweep")) << report;
  const nlohmann::json& sweep = report.at("sweep");
  ASSERT_EQ(sweep.size(), 2u) << report;
  std::vector<double> rates, medians, speedups;
  for (size_t k = 0; k < 2; ++k) {
    const nlohmann::json& entry = sweep[k];
    EXPECT_EQ(entry.at("devices"), k + 1) << entry;
    EXPECT_TRUE(entry.at("samples_per_s").is_number()) << entry;
    EXPECT_TRUE(entry.at("round_samples_per_s").is_array()) << entry;
    rates.push_back(entry.at("median_samples_per_s").get<double>());
    medians.push_back(entry.at("median_step_ms").get<double>());
    speedups.push_back(entry.at("speedup").get<double>());
    EXPECT_NEAR(entry.at("efficiency").get<double>(), speedups.back() / static_cast<double>(k + 1),
                1e-8)
        << entry;
  }
  for (size_t k = 0; k < 2; ++k) {
    EXPECT_NEAR(rates[k], 8e3 / medians[k], 1e-6 * rates[k]) << report;
    EXPECT_NEAR(speedups[k], medians[0] / medians[k], 1e-6) << report;
  }
  // The table prints the same figures: samples/s at the median step, the speed-up, the median.
  for (size_t k = 0; k < 2; ++k) {
    char row[128];
    std::snprintf(row, sizeof row, "%-8zu %12.1f %8.2fx %10.1f%% %15.4f\n", k + 1, rates[k],
                  speedups[k], 100.0 * speedups[k] / static_cast<double>(k + 1), medians[k]);
    EXPECT_NE(r.output.find(row), std::string::npos) << r.output << "\nwant: " << row;
  }
  EXPECT_NE(r.output.find("(samples/s, speed-up and efficiency at the median step time)\n"),
            std::string::npos)
      << r.output;
}

}  // namespace
}  // namespace dprun::testing
