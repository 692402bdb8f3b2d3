// --precision on the command line: run, bench, inspect and conformance in 16 bits, and the
// errors for what it does not take.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <sstream>

#include "cli_test_util.h"
#include "graph_test_util.h"
#include "loader/npy.h"
#include "loader/onnx_loader.h"

namespace dprun::testing {
namespace {

namespace fs = std::filesystem;

void expect_usage_error(const CommandResult& r, const std::string& message) {
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_EQ(r.output, "dprun: " + message + "\n");
}

TEST(PrecisionCli, RunWritesFloat32OutputsWithin16BitsOfTheFloat32Run) {
  const std::string model = source_path("models/mlp.onnx");
  const std::string input = " --input input=" + source_path("models/mlp.input.input.npy");
  const fs::path dir = scratch_path("dprun_precision_cli");
  fs::remove_all(dir);
  for (const char* precision : {"float32", "float16", "bfloat16"}) {
    const fs::path out = dir / precision;
    CommandResult r = run_dprun(model + input + " --devices cpu:0 --precision " + precision +
                                " --output-dir " + out.string());
    ASSERT_EQ(r.status, 0) << r.output;
  }
  const Tensor want = read_npy((dir / "float32" / "logits.npy").string());
  for (const auto& [precision, bound] : {std::pair{"float16", 3e-3}, {"bfloat16", 3e-2}}) {
    const Tensor got = read_npy((dir / precision / "logits.npy").string());
    ASSERT_EQ(got.dtype(), DType::Float32) << precision;
    ASSERT_EQ(got.shape(), want.shape()) << precision;
    double scale = 0, worst = 0;
    for (int64_t i = 0; i < want.numel(); ++i) {
      scale = std::max(scale, std::fabs(want.item_as_double(i)));
      worst = std::max(worst, std::fabs(got.item_as_double(i) - want.item_as_double(i)));
    }
    EXPECT_LT(worst, bound * scale) << precision;
    EXPECT_GT(worst, 0) << precision << " gave the float32 bits";
  }
  fs::remove_all(dir);
}

TEST(PrecisionCli, InspectShowsTheConversionAndTheCastsEachBackendAdds) {
  CommandResult r = run_dprun("inspect " + source_path("models/mlp.onnx") +
                              " --precision float16 --devices cpu:0,sim:0");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("  converted to float16 (float32 inputs and outputs kept)\n"),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("kernels: every node has a cpu kernel\n"), std::string::npos) << r.output;
  // Both have 16-bit Gemms: no Casts. The CPU fuses each Gemm with its Relu into a 16-bit
  // FusedGemm; a GPU's FusedGemm is float32, so there nothing is fused.
  EXPECT_NE(r.output.find("rewrite for cpu: 7 nodes become 5 (dprun::FusedGemm 2 (Relu 2))\n"
                          "placement on cpu: 5 nodes on cpu\n"),
            std::string::npos)
      << r.output;
  EXPECT_EQ(r.output.find("rewrite for sim"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("placement on sim: 7 nodes on sim"), std::string::npos) << r.output;

  // The CNN: every node has a 16-bit kernel on both.
  r = run_dprun("inspect " + source_path("models/cnn.onnx") +
                " --precision float16 --devices cpu:0,sim:0");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_EQ(r.output.find("rewrite for"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("placement on cpu: 15 nodes on cpu\n"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("placement on sim: 15 nodes on sim"), std::string::npos) << r.output;

  // AveragePool has a 16-bit kernel on the CPU, none on a GPU: there it runs in float32 between
  // a Cast of its input and one of its output.
  auto graph = std::make_shared<Graph>();
  graph->name = "pool";
  graph->opset_imports[""] = 17;
  graph->inputs = {{"x", float32_type({1, 2, 4, 4})}};
  Node pool = make_node("AveragePool", {"x"}, {"p"});
  pool.attributes["kernel_shape"] = Attribute::of_ints({2, 2});
  graph->nodes = {pool, make_node("Relu", {"p"}, {"y"})};
  graph->outputs = {{"y", float32_type({1, 2, 3, 3})}};
  const fs::path dir = scratch_path("dprun_precision_inspect");
  fs::remove_all(dir);
  fs::create_directories(dir);
  save_graph(*graph, {}, (dir / "pool.onnx").string());
  r = run_dprun("inspect " + (dir / "pool.onnx").string() +
                " --precision float16 --devices cpu:0,sim:0");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_EQ(r.output.find("rewrite for cpu"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("rewrite for sim: 4 nodes become 6 (Cast 2 (16-bit values to and from "
                          "float32 kernels))\n"
                          "  in float32 between Casts: AveragePool 1\n"),
            std::string::npos)
      << r.output;
  fs::remove_all(dir);
}

TEST(PrecisionCli, BenchRunsIn16Bits) {
  CommandResult r = run_dprun("bench " + source_path("models/cnn.onnx") +
                              " --devices cpu:0 --precision bfloat16 --iters 2 --warmup 1");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("samples/s"), std::string::npos) << r.output;
}

TEST(PrecisionCli, ConformanceConvertsEachTest) {
  CommandResult r =
      run_dprun("conformance --precision float16 --suite node --filter test_matmul_2d");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("node                  1 passed,    0 failed,    0 skipped"),
            std::string::npos)
      << r.output;
}

TEST(PrecisionCli, OtherPrecisionsAndCommandsAreUsageErrors) {
  const std::string model = source_path("models/mlp.onnx");
  expect_usage_error(run_dprun(model + " --precision float64"),
                     "--precision: 'float64' is not float32, float16 or bfloat16");
  expect_usage_error(run_dprun("inspect " + model + " --precision int8"),
                     "--precision: 'int8' is not float32, float16 or bfloat16");
  expect_usage_error(run_dprun("conformance --precision half"),
                     "--precision: 'half' is not float32, float16 or bfloat16");
  expect_usage_error(run_dprun("conformance --precision float16 --via-cli"),
                     "--precision runs in process: leave out --via-cli");
  expect_usage_error(run_dprun("train " + model + " --loss mse --precision float16"),
                     "--precision float16: training in float16 needs loss scaling, which dprun "
                     "does not do; use bfloat16");
  expect_usage_error(run_dprun("train " + model + " --loss mse --precision float64"),
                     "--precision: 'float64' is not float32 or bfloat16");
}

// Mixed-precision training: the passes in bfloat16, the saved parameters float32; the losses
// follow the float32 run's within bfloat16's rounding.
TEST(PrecisionCli, TrainInBfloat16SavesFloat32ParametersAndTracksFloat32) {
  const fs::path dir = scratch_path("dprun_precision_train");
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::string data = source_path("models/training/mlp_sgd");
  std::map<std::string, std::vector<double>> losses;
  for (const char* precision : {"float32", "bfloat16"}) {
    const fs::path saved = dir / (std::string(precision) + ".onnx");
    const fs::path json = dir / (std::string(precision) + ".json");
    CommandResult r =
        run_dprun("train " + data + ".onnx --input x=" + data + ".x.npy --target " + data +
                  ".target.npy --loss cross_entropy --optimizer sgd --lr 0.1 --batch 10 --steps 6 "
                  "--no-shuffle --devices cpu:0,cpu:1 --precision " +
                  precision + " --save " + saved.string() + " --json " + json.string());
    ASSERT_EQ(r.status, 0) << r.output;
    const std::shared_ptr<Graph> trained = load_graph(saved.string());
    for (const auto& [name, tensor] : trained->initializers)
      if (is_floating(tensor.dtype())) {
        EXPECT_EQ(tensor.dtype(), DType::Float32) << name;
      }
    std::ifstream in(json);
    std::stringstream read;
    read << in.rdbuf();
    const std::string text = read.str();
    std::smatch m;
    ASSERT_TRUE(std::regex_search(text, m, std::regex(R"re("losses": \[([^\]]*)\])re"))) << text;
    std::stringstream list(m[1].str());
    for (std::string item; std::getline(list, item, ',');)
      losses[precision].push_back(std::stod(item));
  }
  ASSERT_EQ(losses["bfloat16"].size(), 6u);
  ASSERT_EQ(losses["float32"].size(), 6u);
  bool any_difference = false;
  for (size_t s = 0; s < 6; ++s) {
    EXPECT_NEAR(losses["bfloat16"][s], losses["float32"][s], 0.02 * losses["float32"][s])
        << "step " << s;
    any_difference = any_difference || losses["bfloat16"][s] != losses["float32"][s];
  }
  EXPECT_TRUE(any_difference) << "bfloat16 training gave the float32 losses";
  fs::remove_all(dir);
}

}  // namespace
}  // namespace dprun::testing
