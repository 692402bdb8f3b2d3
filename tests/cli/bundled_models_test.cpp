// dprun on the bundled models, compared with PyTorch's outputs shipped beside them.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>

#include "cli_test_util.h"
#include "loader/npy.h"

namespace dprun::testing {
namespace {

namespace fs = std::filesystem;

struct BundledModel {
  std::string name;
  std::vector<std::string> inputs;
  std::vector<std::string> outputs;
  friend void PrintTo(const BundledModel& m, std::ostream* os) { *os << m.name; }
};

class BundledModels : public ::testing::TestWithParam<BundledModel> {};

// Worst ratio |got - want| / (1e-4 * |want| + 1e-6 * max|want|): below 1 means every element
// is within 1e-4 relative error, with an absolute floor of 1e-6 of the tensor's scale for
// elements near zero, where float32 rounding noise dominates any relative measure.
double tolerance_ratio(const Tensor& got, const Tensor& want) {
  double scale = 0;
  for (int64_t i = 0; i < want.numel(); ++i)
    scale = std::max(scale, std::fabs(want.item_as_double(i)));
  double worst = 0;
  for (int64_t i = 0; i < want.numel(); ++i) {
    double a = got.item_as_double(i), b = want.item_as_double(i);
    worst = std::max(worst, std::fabs(a - b) / (1e-4 * std::fabs(b) + 1e-6 * scale + 1e-30));
  }
  return worst;
}

TEST_P(BundledModels, MatchesPyTorch) {
  const BundledModel& m = GetParam();
  fs::path out_dir = fs::temp_directory_path() / ("dprun_bundled_" + m.name);
  fs::remove_all(out_dir);
  std::string args = source_path("models/" + m.name + ".onnx") + " --devices cpu:0 --output-dir " +
                     out_dir.string();
  for (const auto& in : m.inputs)
    args += " --input " + in + "=" + source_path("models/" + m.name + ".input." + in + ".npy");
  CommandResult r = run_dprun(args);
  ASSERT_EQ(r.status, 0) << r.output;
  for (const auto& out : m.outputs) {
    Tensor want = read_npy(source_path("models/" + m.name + ".output." + out + ".npy"));
    Tensor got = read_npy((out_dir / (out + ".npy")).string());
    ASSERT_EQ(got.shape(), want.shape()) << out;
    ASSERT_EQ(got.dtype(), want.dtype()) << out;
    EXPECT_LT(tolerance_ratio(got, want), 1.0) << m.name << " output " << out;
  }
  fs::remove_all(out_dir);
}

INSTANTIATE_TEST_SUITE_P(Models, BundledModels,
                         ::testing::Values(BundledModel{"mlp", {"input"}, {"logits"}},
                                           BundledModel{"cnn", {"image"}, {"logits"}},
                                           BundledModel{"transformer",
                                                        {"input_ids", "attention_mask"},
                                                        {"hidden", "pooled"}}),
                         [](const auto& info) { return info.param.name; });

TEST(BundledModels, RandomInputsFollowBatchAndAreDeterministic) {
  auto first = run_dprun(source_path("models/cnn.onnx") + " --batch 3");
  auto second = run_dprun(source_path("models/cnn.onnx") + " --batch 3");
  ASSERT_EQ(first.status, 0) << first.output;
  EXPECT_NE(first.output.find("float32[3, 10]"), std::string::npos) << first.output;
  auto values = [](const std::string& text) { return text.substr(text.find("logits"), 120); };
  EXPECT_EQ(values(first.output), values(second.output));
}

TEST(BundledModels, OutputsAreReadableByNumpy) {
  fs::path out_dir = fs::temp_directory_path() / "dprun_numpy_check";
  fs::remove_all(out_dir);
  ASSERT_EQ(
      run_dprun(source_path("models/mlp.onnx") + " --batch 2 --output-dir " + out_dir.string())
          .status,
      0);
  std::string check = "/usr/bin/python3 -c \"import numpy as n; a=n.load('" +
                      (out_dir / "logits.npy").string() +
                      "'); assert a.shape==(2,10) and a.dtype==n.float32, a\"";
  EXPECT_EQ(std::system(check.c_str()), 0);
  fs::remove_all(out_dir);
}

TEST(BundledModels, InspectListsInputsOpsAndParameters) {
  auto r = run_dprun("inspect " + source_path("models/transformer.onnx"));
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("input_ids"), std::string::npos);
  EXPECT_NE(r.output.find("int64[batch, seq]"), std::string::npos);
  EXPECT_NE(r.output.find("LayerNormalization"), std::string::npos);
  EXPECT_NE(r.output.find("parameters:"), std::string::npos);
  EXPECT_NE(r.output.find("every node has a cpu kernel"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace dprun::testing
