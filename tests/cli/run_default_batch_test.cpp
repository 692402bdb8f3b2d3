// `dprun MODEL --devices ...` on generated inputs without --batch gives every device a row, so
// the quick start's run shows the data-parallel split.
#include <gtest/gtest.h>

#include <algorithm>
#include <regex>
#include <string>

#include "cli_test_util.h"

namespace dprun::testing {
namespace {

const std::string kNote = "generated inputs: batch 3, one row per device (--batch N to choose)\n";

TEST(RunDefaultBatch, GeneratedInputsGetOneRowPerDevice) {
  auto r = run_dprun(source_path("models/cnn.onnx") + " --devices cpu:0,cpu:1,cpu:2");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(
      r.output.find("  input  image                    float32[3, 3, 32, 32] on cpu:0\n" + kNote +
                    "split along dim 0 (chunk):\n  cpu:0    1 rows\n  cpu:1    1 rows\n"
                    "  cpu:2    1 rows\n  output logits                   float32[3, 10]"),
      std::string::npos)
      << r.output;
}

// The quick start's own command: as many rows as `all` has devices, one on each.
TEST(RunDefaultBatch, DevicesAllSplitsOverEveryDevice) {
  auto r = run_dprun(source_path("models/cnn.onnx") + " --devices all");
  ASSERT_EQ(r.status, 0) << r.output;
  std::smatch devices;
  ASSERT_TRUE(std::regex_search(r.output, devices, std::regex(R"(on ((cpu:\d+,?)+)\n)")))
      << r.output;
  const std::string list = devices[1].str();
  const size_t count = static_cast<size_t>(std::count(list.begin(), list.end(), ',')) + 1;
  EXPECT_NE(r.output.find("generated inputs: batch " + std::to_string(count) +
                          ", one row per device (--batch N to choose)\n"),
            std::string::npos)
      << r.output;
  for (size_t d = 0; d < count; ++d)
    EXPECT_NE(r.output.find("  cpu:" + std::to_string(d) + "    1 rows\n"), std::string::npos)
        << r.output;
}

TEST(RunDefaultBatch, GivenBatchOrInputFilesAreKept) {
  auto r = run_dprun(source_path("models/cnn.onnx") + " --devices cpu:0,cpu:1 --batch 1");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_EQ(r.output.find("generated inputs"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("split along dim 0 (chunk):\n  cpu:0    1 rows\n  output"),
            std::string::npos)
      << r.output;

  r = run_dprun(source_path("models/mlp.onnx") + " --devices cpu:0,cpu:1,cpu:2 --input input=" +
                source_path("models/mlp.input.input.npy"));
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_EQ(r.output.find("generated inputs"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("  cpu:0    2 rows\n  cpu:1    2 rows\n  output"), std::string::npos)
      << r.output;
}

}  // namespace
}  // namespace dprun::testing
