// --precision on the command line: run, bench, inspect and conformance in 16 bits, and the
// errors for what it does not take.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "accelerator_test_util.h"
#include "cli_test_util.h"
#include "graph_test_util.h"
#include "loader/npy.h"
#include "loader/onnx_loader.h"

namespace dprun::testing {
namespace {

namespace fs = std::filesystem;

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
  // Both have 16-bit Gemms: no Casts. Both fuse each Gemm with its Relu into a 16-bit
  // FusedGemm.
  EXPECT_NE(r.output.find("rewrite for cpu: 7 nodes become 5 (dprun::FusedGemm 2 (Relu 2))\n"
                          "placement on cpu: 5 nodes on cpu\n"),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("rewrite for sim: 7 nodes become 5 (dprun::FusedGemm 2 (Relu 2))\n"
                          "placement on sim: 5 nodes on sim, 0 on the cpu (no sim kernel)\n"),
            std::string::npos)
      << r.output;

  // The CNN: every node has a 16-bit kernel on both.
  r = run_dprun("inspect " + source_path("models/cnn.onnx") +
                " --precision float16 --devices cpu:0,sim:0");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_EQ(r.output.find("rewrite for"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("placement on cpu: 15 nodes on cpu\n"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("placement on sim: 15 nodes on sim"), std::string::npos) << r.output;

  // LRN has a 16-bit kernel on the CPU, none on a GPU: there it runs in float32 between a Cast
  // of its input and one of its output.
  auto graph = std::make_shared<Graph>();
  graph->name = "lrn";
  graph->opset_imports[""] = 17;
  graph->inputs = {{"x", float32_type({1, 2, 4, 4})}};
  Node lrn = make_node("LRN", {"x"}, {"p"});
  lrn.attributes["size"] = Attribute::of_int(3);
  graph->nodes = {lrn, make_node("Relu", {"p"}, {"y"})};
  graph->outputs = {{"y", float32_type({1, 2, 4, 4})}};
  const fs::path dir = scratch_path("dprun_precision_inspect");
  fs::remove_all(dir);
  fs::create_directories(dir);
  save_graph(*graph, {}, (dir / "lrn.onnx").string());
  r = run_dprun("inspect " + (dir / "lrn.onnx").string() +
                " --precision float16 --devices cpu:0,sim:0");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_EQ(r.output.find("rewrite for cpu"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("rewrite for sim: 4 nodes become 6 (Cast 2 (16-bit values to and from "
                          "float32 kernels))\n"
                          "  in float32 between Casts: LRN 1\n"),
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

const std::string kMlpData = "models/training/mlp_sgd";

TEST(PrecisionCli, OtherPrecisionsAndCommandsAreUsageErrors) {
  const std::string model = source_path("models/mlp.onnx");
  expect_usage_error(run_dprun(model + " --precision float64"),
                     "--precision: 'float64' is not float32, float16 or bfloat16");
  expect_usage_error(run_dprun("inspect " + model + " --precision int8"),
                     "--precision: 'int8' is not float32, float16 or bfloat16");
  expect_usage_error(run_dprun("conformance --precision half"),
                     "--precision: 'half' is not float32, float16 or bfloat16");
  expect_usage_error(run_dprun("conformance --precision float16 --via-cli"),
                     "--via-cli excludes --precision");
  // A complete command line but for the option under test.
  const std::string data = source_path(kMlpData);
  const std::string train = "train " + data + ".onnx --input x=" + data + ".x.npy --target " +
                            data + ".target.npy --loss cross_entropy --optimizer sgd --lr 0.1 " +
                            "--batch 10 --steps 1 --save " +
                            scratch_path("dprun_precision_refused.onnx").string() + " ";
  const std::vector<std::pair<std::string, std::string>> train_errors = {
      {"--precision float64", "--precision: 'float64' is not float32, float16 or bfloat16"},
      {"--precision bfloat16 --loss-scale 8",
       "--loss-scale: only float16 training scales its loss (--precision float16)"},
      {"--loss-scale-growth-interval 5",
       "--loss-scale-growth-interval: only float16 training scales its loss (--precision "
       "float16)"},
      {"--precision float16 --loss-scale 0", "--loss-scale: 0 is not a positive float32"},
      {"--precision float16 --loss-scale 1e39", "--loss-scale: 1e+39 is not a positive float32"},
  };
  for (const auto& [options, message] : train_errors)
    expect_usage_error(run_dprun(train + options), message);
}

std::string train_mlp_command(const std::string& precision, const fs::path& dir,
                              const std::string& more = "") {
  const std::string data = source_path(kMlpData);
  return "train " + data + ".onnx --input x=" + data + ".x.npy --target " + data +
         ".target.npy --loss cross_entropy --optimizer sgd --lr 0.1 --batch 10 --no-shuffle "
         "--devices cpu:0,cpu:1 --precision " +
         precision + " --save " + (dir / (precision + ".onnx")).string() + " --json " +
         (dir / (precision + ".json")).string() + more;
}

// Mixed-precision training: the passes in 16 bits, the saved parameters float32; the losses
// follow the float32 run's within the 16-bit type's rounding. float16 scales its loss: the
// default scale overflows no gradient of this model, so every step is taken.
TEST(PrecisionCli, TrainIn16BitsSavesFloat32ParametersAndTracksFloat32) {
  const fs::path dir = scratch_path("dprun_precision_train");
  fs::remove_all(dir);
  fs::create_directories(dir);
  std::map<std::string, std::vector<double>> losses;
  for (const std::string precision : {"float32", "bfloat16", "float16"}) {
    CommandResult r = run_dprun(train_mlp_command(precision, dir, " --steps 6"));
    ASSERT_EQ(r.status, 0) << r.output;
    const std::shared_ptr<Graph> trained = load_graph((dir / (precision + ".onnx")).string());
    for (const auto& [name, tensor] : trained->initializers)
      if (is_floating(tensor.dtype())) {
        EXPECT_EQ(tensor.dtype(), DType::Float32) << name;
      }
    const nlohmann::json report = read_json(dir / (precision + ".json"));
    losses[precision] = numbers(report, "losses").value_or(std::vector<double>{});
    if (precision == "float16") {
      EXPECT_EQ(numbers(report, "loss_scales"), std::vector<double>(6, 65536)) << report;
      EXPECT_EQ(numbers(report, "skipped_steps"), std::vector<double>{}) << report;
      EXPECT_NE(r.output.find("; 0 of 6 steps skipped for overflowing gradients, loss scale now "
                              "65536; saved "),
                std::string::npos)
          << r.output;
    } else {
      EXPECT_FALSE(report.contains("loss_scales")) << report;
      EXPECT_FALSE(report.contains("skipped_steps")) << report;
    }
  }
  ASSERT_EQ(losses["float32"].size(), 6u);
  for (const std::string precision : {"bfloat16", "float16"}) {
    SCOPED_TRACE(precision);
    ASSERT_EQ(losses[precision].size(), 6u);
    const double tolerance = precision == "bfloat16" ? 0.02 : 0.002;
    bool any_difference = false;
    for (size_t s = 0; s < 6; ++s) {
      EXPECT_NEAR(losses[precision][s], losses["float32"][s], tolerance * losses["float32"][s])
          << "step " << s;
      any_difference = any_difference || losses[precision][s] != losses["float32"][s];
    }
    EXPECT_TRUE(any_difference) << precision << " training gave the float32 losses";
  }
  fs::remove_all(dir);
}

// From a scale far too large, each overflowing step is skipped and halves the scale until the
// gradients fit; after three clean steps in a row the scale doubles. The reported scales follow
// GradScaler's rule exactly from the reported skips, and the summary line agrees.
TEST(PrecisionCli, TrainInFloat16BacksOffAnOverflowingLossScale) {
  const fs::path dir = scratch_path("dprun_precision_train_scale");
  fs::remove_all(dir);
  fs::create_directories(dir);
  CommandResult r = run_dprun(train_mlp_command(
      "float16", dir, " --steps 24 --loss-scale 1e9 --loss-scale-growth-interval 3"));
  ASSERT_EQ(r.status, 0) << r.output;
  const nlohmann::json report = read_json(dir / "float16.json");
  const std::vector<double> scales = numbers(report, "loss_scales").value_or(std::vector<double>{});
  const std::vector<double> skipped =
      numbers(report, "skipped_steps").value_or(std::vector<double>{});
  ASSERT_EQ(scales.size(), 24u) << report;
  ASSERT_FALSE(skipped.empty()) << report;
  EXPECT_EQ(skipped.front(), 1) << "a scale of 1e9 overflows the first step";
  double scale = 1e9;
  int clean = 0;
  for (size_t s = 0; s < scales.size(); ++s) {
    // The JSON holds each float32 scale exactly (9 significant digits or more), read back.
    ASSERT_EQ(static_cast<float>(scales[s]), static_cast<float>(scale)) << "step " << s + 1;
    if (std::count(skipped.begin(), skipped.end(), static_cast<double>(s + 1))) {
      scale /= 2;
      clean = 0;
    } else if (++clean == 3) {
      scale *= 2;
      clean = 0;
    }
  }
  EXPECT_LT(skipped.size(), 16u) << "training stalled: " << report;
  std::ostringstream summary;
  summary << "; " << skipped.size() << " of 24 steps skipped for overflowing gradients, loss "
          << "scale now " << scale << "; saved ";
  EXPECT_NE(r.output.find(summary.str()), std::string::npos) << r.output << "\n" << summary.str();
  // The last epoch's line shows the scale and the skips too.
  std::ostringstream last_epoch;
  last_epoch << ", loss scale " << scale << ", " << skipped.size() << " skipped\nlast batch loss ";
  EXPECT_NE(r.output.find(last_epoch.str()), std::string::npos) << r.output;
  const std::vector<double> losses = numbers(report, "losses").value_or(std::vector<double>{});
  ASSERT_EQ(losses.size(), 24u) << report;
  for (double loss : losses) EXPECT_TRUE(std::isfinite(loss)) << report;
  fs::remove_all(dir);
}

}  // namespace
}  // namespace dprun::testing
