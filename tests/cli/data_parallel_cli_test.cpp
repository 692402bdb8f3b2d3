// dprun run / bench across CPU virtual devices, checked through the files they write.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "cli_test_util.h"
#include "engine/backend.h"
#include "loader/npy.h"
#include "loader/onnx_loader.h"

namespace dprun::testing {
namespace {

namespace fs = std::filesystem;

fs::path fresh_dir(const std::string& name) {
  fs::path dir = fs::temp_directory_path() / ("dprun_dp_cli_" + name);
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

// A model whose output "total" is 0-d: ReduceSum over all axes with keepdims = 0, plus
// y = x + row with a row that must be broadcast rather than split.
std::string write_scalar_model(const fs::path& dir) {
  Graph g;
  g.name = "scalar_total";
  g.opset_imports[""] = 13;
  g.inputs.push_back({"x", {DType::Float32, SymbolicShape{Dim::named("batch"), Dim::known(3)}}});
  g.inputs.push_back({"row", {DType::Float32, SymbolicShape{Dim::known(3)}}});
  Node add;
  add.name = "add";
  add.op_type = "Add";
  add.inputs = {"x", "row"};
  add.outputs = {"y"};
  Node sum;
  sum.name = "sum";
  sum.op_type = "ReduceSum";
  sum.inputs = {"y"};
  sum.outputs = {"total"};
  Attribute keep;
  keep.kind = Attribute::Kind::Int;
  keep.i = 0;
  sum.attributes["keepdims"] = keep;
  g.nodes = {add, sum};
  g.outputs.push_back({"y", {DType::Float32, SymbolicShape{Dim::named("batch"), Dim::known(3)}}});
  g.outputs.push_back({"total", {DType::Float32, SymbolicShape{}}});
  std::string path = (dir / "scalar.onnx").string();
  save_graph(g, {}, path);
  return path;
}

// A model where splitting dim 1 is meaningful: y = ReduceSum(x, axes = [-1], keepdims = 1)
// for x: float32[rows, cols], both symbolic. Split along the columns, each device sums only
// its own columns.
std::string write_column_sum_model(const fs::path& dir) {
  Graph g;
  g.name = "column_sum";
  g.opset_imports[""] = 11;
  g.inputs.push_back(
      {"x", {DType::Float32, SymbolicShape{Dim::named("rows"), Dim::named("cols")}}});
  Node sum;
  sum.name = "sum";
  sum.op_type = "ReduceSum";
  sum.inputs = {"x"};
  sum.outputs = {"y"};
  Attribute axes;
  axes.kind = Attribute::Kind::Ints;
  axes.ints = {-1};
  sum.attributes["axes"] = axes;
  g.nodes = {sum};
  g.outputs.push_back({"y", {DType::Float32, SymbolicShape{Dim::named("rows"), Dim::known(1)}}});
  std::string path = (dir / "column_sum.onnx").string();
  save_graph(g, {}, path);
  return path;
}

class BitwiseAcrossDevices : public ::testing::TestWithParam<std::string> {};

TEST_P(BitwiseAcrossDevices, SameBytesAsOneDevice) {
  const std::string model = GetParam();
  fs::path dir = fresh_dir("bitwise_" + model);
  for (int64_t batch : {10, 67}) {
    std::string base = source_path("models/" + model + ".onnx") + " --batch " +
                       std::to_string(batch) + " --symbol seq=24 --output-dir ";
    ASSERT_EQ(run_dprun(base + (dir / "one").string() + " --devices cpu:0").status, 0);
    for (const char* devices : {"cpu:0,cpu:1", "cpu:0,cpu:1,cpu:2,cpu:3", "cpu"}) {
      fs::path out = dir / devices;
      auto r = run_dprun(base + out.string() + " --devices " + devices);
      ASSERT_EQ(r.status, 0) << r.output;
      for (const auto& entry : fs::directory_iterator(dir / "one"))
        EXPECT_TRUE(read_text(entry.path()) == read_text(out / entry.path().filename()))
            << model << " batch " << batch << " on " << devices << ": " << entry.path().filename();
    }
  }
  fs::remove_all(dir);
}
INSTANTIATE_TEST_SUITE_P(BundledModels, BitwiseAcrossDevices,
                         ::testing::Values("mlp", "cnn", "transformer"));

// The bytes of the bundled MLP's parameters: what each device holding a replica holds at least.
size_t mlp_parameter_bytes() {
  size_t bytes = 0;
  const Model mlp = load_model(source_path("models/mlp.onnx"), Device::cpu());
  for (const Tensor& p : mlp.parameters()) bytes += p.nbytes();
  return bytes;
}

TEST(DataParallelCli, JsonReportsTheSplit) {
  fs::path dir = fresh_dir("json");
  auto r = run_dprun(source_path("models/mlp.onnx") +
                     " --devices cpu:0,cpu:1,cpu:2,cpu:3 --batch 5 --json " +
                     (dir / "run.json").string());
  ASSERT_EQ(r.status, 0) << r.output;
  const nlohmann::json report = read_json(dir / "run.json");
  EXPECT_EQ(report.at("devices_used"), nlohmann::json({"cpu:0", "cpu:1", "cpu:2"})) << report;
  EXPECT_EQ(report.at("chunk_rows"), nlohmann::json({2, 2, 1})) << report;
  EXPECT_EQ(report.at("outputs"), nlohmann::json::parse(R"({"logits": [5, 10]})")) << report;
  EXPECT_NE(r.output.find("cpu:2    1 rows"), std::string::npos) << r.output;
  // Each device used holds a copy of the parameters (replica 0 the model's own), and little
  // else at batch 5.
  const size_t parameter_bytes = mlp_parameter_bytes();
  ASSERT_TRUE(report.contains("peak_bytes")) << report;
  const nlohmann::json& peaks = report.at("peak_bytes");
  ASSERT_EQ(peaks.size(), 3u) << report;
  for (const std::string device : {"cpu:0", "cpu:1", "cpu:2"}) {
    const size_t peak = peaks.at(device).get<size_t>();
    EXPECT_GE(peak, parameter_bytes) << device;
    EXPECT_LT(peak, 2 * parameter_bytes) << device;
  }

  r = run_dprun(source_path("models/mlp.onnx") +
                " --devices cpu:0,cpu:1,cpu:2,cpu:3 --batch 5 --split-policy even --json " +
                (dir / "even.json").string());
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_EQ(read_json(dir / "even.json").at("chunk_rows"), nlohmann::json({2, 1, 1, 1}));

  r = run_dprun(source_path("models/mlp.onnx") +
                " --devices cpu:0,cpu:1 --batch 9 --split-policy weighted --weights 2,1 --json " +
                (dir / "weighted.json").string());
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_EQ(read_json(dir / "weighted.json").at("chunk_rows"), nlohmann::json({6, 3}));
  fs::remove_all(dir);
}

TEST(DataParallelCli, ScalarOutputsGatherIntoAVectorAndBroadcastSplit) {
  fs::path dir = fresh_dir("scalar");
  std::string model = write_scalar_model(dir);
  auto r = run_dprun(model + " --devices cpu:0,cpu:1,cpu:2 --batch 6 --split row=none --json " +
                     (dir / "s.json").string());
  ASSERT_EQ(r.status, 0) << r.output;
  const nlohmann::json report = read_json(dir / "s.json");
  EXPECT_EQ(report.at("outputs"), nlohmann::json::parse(R"({"total": [3], "y": [6, 3]})"))
      << report;
  EXPECT_NE(
      r.output.find(
          "warning: was asked to gather along dimension 0, but all input tensors were scalars"),
      std::string::npos)
      << r.output;
  // Without --split row=none the 3-element row is split like the batch of 6: an error.
  auto bad = run_dprun(model + " --devices cpu:0,cpu:1 --batch 6");
  EXPECT_EQ(bad.status, 1);
  EXPECT_NE(bad.output.find("inputs disagree on the split size: 'x' has 6"), std::string::npos)
      << bad.output;
  fs::remove_all(dir);
}

TEST(DataParallelCli, OutputDeviceAndDim) {
  fs::path dir = fresh_dir("dim");
  auto r = run_dprun(source_path("models/mlp.onnx") +
                     " --devices cpu:0,cpu:1 --batch 4 --output-device cpu:1");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("float32[4, 10] on cpu:1"), std::string::npos) << r.output;

  // x = [[0 1 2 3 4], [5 6 7 8 9]] split along dim 1: cpu:0 takes columns 0..2, cpu:1 takes
  // columns 3..4; each sums its own, and the [2, 1] sums are joined along dim 1 on cpu:1.
  std::string model = write_column_sum_model(dir);
  std::string x = (dir / "x.npy").string();
  write_npy(Tensor::from_vector<float>({2, 5}, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9}), x);
  for (const char* dim : {"1", "-1"}) {
    fs::path out = dir / (std::string("out") + dim);
    r = run_dprun(model + " --devices cpu:0,cpu:1 --output-device cpu:1 --dim " + dim +
                  " --input x=" + x + " --output-dir " + out.string());
    ASSERT_EQ(r.status, 0) << r.output;
    EXPECT_NE(r.output.find(std::string("split along dim ") + dim +
                            " (chunk):\n  cpu:0    3 rows\n  cpu:1    2 rows\n"),
              std::string::npos)
        << r.output;
    EXPECT_NE(r.output.find("float32[2, 2] on cpu:1"), std::string::npos) << r.output;
    Tensor y = read_npy((out / "y.npy").string());
    ASSERT_EQ(y.shape(), (Shape{2, 2}));
    EXPECT_EQ(std::vector<float>(y.data<float>(), y.data<float>() + 4),
              (std::vector<float>{0 + 1 + 2, 3 + 4, 5 + 6 + 7, 8 + 9}))
        << "--dim " << dim;
  }
  fs::remove_all(dir);
}

TEST(DataParallelCli, AllMeansOneCpuDevicePerCore) {
  std::string model = source_path("models/mlp.onnx");
  auto r = run_dprun(model + " --devices all");
  ASSERT_EQ(r.status, 0) << r.output;
  std::string devices;
  for (int i = 0; i < backend_for(DeviceType::CPU).device_count(); ++i)
    devices += (i ? ",cpu:" : "cpu:") + std::to_string(i);
  EXPECT_NE(r.output.find("model " + model + " on " + devices + "\n"), std::string::npos)
      << r.output;
}

TEST(DataParallelCli, BadParallelFlagsAreUsageErrors) {
  std::string model = source_path("models/mlp.onnx");
  EXPECT_EQ(run_dprun(model + " --split-policy sideways").status, 2);
  EXPECT_EQ(run_dprun(model + " --weights 1,2").status, 2);
  EXPECT_EQ(run_dprun(model + " --devices cpu:0,cpu:1 --split-policy weighted --weights 1").status,
            2);
  EXPECT_EQ(run_dprun(model + " --split input").status, 2);
  EXPECT_EQ(run_dprun(model + " --output-device npu:0").status, 2);
}

TEST(BenchCli, JsonAndSweep) {
  fs::path dir = fresh_dir("bench");
  auto r = run_dprun("bench " + source_path("models/mlp.onnx") +
                     " --devices cpu:0,cpu:1 --batch 8 --iters 3 --warmup 1 --sweep --json " +
                     (dir / "b.json").string());
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("samples/s"), std::string::npos);
  EXPECT_NE(r.output.find("efficiency"), std::string::npos) << r.output;
  const nlohmann::json report = read_json(dir / "b.json");
  EXPECT_TRUE(report.at("samples_per_s").is_number()) << report;
  EXPECT_EQ(report.at("batch"), 8) << report;
  EXPECT_EQ(report.at("iters"), 3) << report;
  EXPECT_EQ(report.at("devices"), nlohmann::json({"cpu:0", "cpu:1"})) << report;
  EXPECT_EQ(report.at("sweep").size(), 2u) << report;
  // Each device runs 4 of the 8 rows. cpu:0 holds the model's parameters (every list's
  // replica 0 shares them); cpu:1 one copy: the sweep's two devices are the given list itself.
  const nlohmann::json& per_device = report.at("per_device");
  ASSERT_EQ(per_device.size(), 2u) << report;
  const size_t parameter_bytes = mlp_parameter_bytes();
  for (size_t d = 0; d < 2; ++d) {
    const std::string device = "cpu:" + std::to_string(d);
    EXPECT_EQ(per_device[d].at("device"), device) << report;
    EXPECT_EQ(per_device[d].at("rows"), 4) << report;
    const size_t peak = per_device[d].at("peak_bytes").get<size_t>();
    EXPECT_GE(peak, parameter_bytes) << device;
    EXPECT_LT(peak, 2 * parameter_bytes) << device;
  }
  fs::remove_all(dir);
}

TEST(BenchCli, RoundsKeepEachDeviceListsBestAndReportEveryRound) {
  fs::path dir = fresh_dir("bench_rounds");
  auto r = run_dprun("bench " + source_path("models/mlp.onnx") +
                     " --devices cpu:0,cpu:1 --batch 4 --iters 2 --warmup 1 --rounds 3 --sweep"
                     " --json " +
                     (dir / "b.json").string());
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("2 iterations x 3 rounds (+1 warm-up)"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find(" over 6 steps\n"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("rounds (samples/s, the best kept): "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("median step ms"), std::string::npos) << r.output;
  const nlohmann::json report = read_json(dir / "b.json");
  EXPECT_EQ(report.at("rounds"), 3) << report;
  // The given list, then the sweep's one and two devices (the given list again): three rounds
  // each, the best kept.
  ASSERT_EQ(report.at("sweep").size(), 2u) << report;
  const std::vector<const nlohmann::json*> lists = {&report, &report.at("sweep")[0],
                                                    &report.at("sweep")[1]};
  for (size_t list = 0; list < lists.size(); ++list) {
    SCOPED_TRACE(list);
    const std::vector<double> rounds =
        numbers(*lists[list], "round_samples_per_s").value_or(std::vector<double>{});
    ASSERT_EQ(rounds.size(), 3u) << report;
    EXPECT_EQ(lists[list]->at("samples_per_s").get<double>(),
              *std::max_element(rounds.begin(), rounds.end()))
        << report;
  }
  EXPECT_EQ(lists[2]->at("round_samples_per_s"), report.at("round_samples_per_s")) << report;
  const nlohmann::json& step_ms = report.at("step_ms");
  const double p10 = step_ms.at("p10").get<double>(), median = step_ms.at("median").get<double>(),
               p90 = step_ms.at("p90").get<double>();
  EXPECT_GT(p10, 0);
  EXPECT_LE(p10, median);
  EXPECT_LE(median, p90);
  EXPECT_EQ(step_ms.at("steps"), 6) << report;
  fs::remove_all(dir);
}

TEST(BenchCli, RoundsOutsideTheirRangeOrWithDistributedAreUsageErrors) {
  const std::string model = "bench " + source_path("models/mlp.onnx") + " --devices cpu:0";
  auto r = run_dprun(model + " --rounds 0");
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_NE(r.output.find("--rounds must be between 1 and 1000, got 0"), std::string::npos)
      << r.output;
  r = run_dprun(model + " --rounds 2 --distributed");
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_NE(r.output.find("--rounds excludes --distributed"), std::string::npos) << r.output;
}

TEST(BenchCli, ProfileListsOpTypes) {
  auto r = run_dprun("bench " + source_path("models/mlp.onnx") +
                     " --devices cpu:0 --batch 4 --iters 2 --warmup 0 --profile");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("calls/it"), std::string::npos) << r.output;
  // The profile lists the compiled plan's ops: the op fusion applies each Relu in its Gemm.
  EXPECT_NE(r.output.find("FusedGemm                       2"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("\nGemm                            1"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("Relu"), std::string::npos) << r.output;
}

TEST(BenchCli, ProfileNodesListsEachNodeInExecutionOrder) {
  auto r = run_dprun("bench " + source_path("models/mlp.onnx") +
                     " --devices cpu:0,cpu:1 --batch 4 --iters 2 --warmup 0 --profile-nodes");
  ASSERT_EQ(r.status, 0) << r.output;
  // One row per node of the compiled plan, named by its first output, with the input shapes a
  // replica saw (2 of the 4 rows each); no per-op table without --profile.
  const size_t first = r.output.find(" /Relu_output_0: [2, 784] [256, 784] [256]\n");
  const size_t second = r.output.find(" /Relu_1_output_0: [2, 256] [128, 256] [128]\n");
  const size_t last = r.output.find(" logits: [2, 128] [10, 128] [10]\n");
  ASSERT_NE(first, std::string::npos) << r.output;
  ASSERT_NE(second, std::string::npos) << r.output;
  ASSERT_NE(last, std::string::npos) << r.output;
  EXPECT_LT(first, second);
  EXPECT_LT(second, last);
  EXPECT_NE(r.output.find("\nFusedGemm"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("calls/it"), std::string::npos) << r.output;
}

TEST(BenchCli, ProfilesAreRefusedWithDistributed) {
  auto r = run_dprun("bench " + source_path("models/mlp.onnx") +
                     " --devices cpu:0 --distributed --profile-nodes");
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_NE(r.output.find("--profile-nodes excludes --distributed"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace dprun::testing
