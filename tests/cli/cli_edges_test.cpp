// The command line's edges: --version, help per command, one error prefix, "did you mean" for
// flags, devices and input names, the run's time apart from its setup.
#include <gtest/gtest.h>

#include <regex>
#include <string>

#include "cli_test_util.h"

namespace dprun::testing {
namespace {

// The version CMake's project() declares.
std::string project_version() {
  std::smatch m;
  const std::string cmake = read_text(source_path("CMakeLists.txt"));
  EXPECT_TRUE(std::regex_search(cmake, m, std::regex(R"(project\(dprun VERSION ([0-9.]+))")));
  return m[1].str();
}

size_t count_of(const std::string& text, const std::string& needle) {
  size_t n = 0;
  for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) ++n;
  return n;
}

TEST(CliEdges, VersionPrintsTheProjectVersion) {
  const std::string want = "dprun " + project_version() + "\n";
  for (const char* form : {"--version", "version"}) {
    auto r = run_dprun(form);
    EXPECT_EQ(r.status, 0) << form;
    EXPECT_EQ(r.output, want) << form;
  }
}

TEST(CliEdges, HelpIsAShortOverviewOfTheCommands) {
  auto r = run_dprun("--help");
  EXPECT_EQ(r.status, 0);
  EXPECT_EQ(r.output.rfind("dprun - data-parallel ONNX execution engine\n\nusage:\n", 0), 0u)
      << r.output;
  for (const char* line : {"  dprun bench MODEL.onnx [options]", "  dprun train MODEL.onnx",
                           "  dprun --version", "  dprun COMMAND --help"})
    EXPECT_NE(r.output.find(line), std::string::npos) << line;
  EXPECT_EQ(r.output.find("--optimizer"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("sim:"), std::string::npos) << r.output;
  EXPECT_LT(count_of(r.output, "\n"), 25u) << r.output;
  EXPECT_EQ(run_dprun("help").output, r.output);
  EXPECT_EQ(run_dprun("-h").output, r.output);
}

TEST(CliEdges, EachCommandsHelpShowsItsOwnOptions) {
  struct Case {
    std::string command, usage, has;
    std::vector<std::string> lacks;
  };
  const std::vector<Case> cases = {
      {"train",
       "usage: dprun train MODEL.onnx",
       "  --optimizer O          sgd | adam | adamw (required)",
       {"--sweep", "--output-dir", "--data DIR", "--profile-nodes"}},
      {"run",
       "usage: dprun [run] MODEL.onnx",
       "  --output-dir DIR ",
       {"--sweep", "--optimizer", "--data DIR"}},
      {"bench",
       "usage: dprun bench MODEL.onnx",
       "  --sweep ",
       {"--output-dir", "--optimizer", "--data DIR"}},
      {"inspect",
       "usage: dprun inspect MODEL.onnx",
       "  --devices LIST ",
       {"--sweep", "--optimizer", "--split"}},
      {"convert",
       "usage: dprun convert MODEL.onnx --save OUT.onnx",
       "  --save OUT.onnx ",
       {"--sweep", "--optimizer", "--devices"}},
      {"conformance",
       "usage: dprun conformance",
       "  --data DIR ",
       {"--sweep", "--optimizer", "--split"}},
  };
  for (const Case& c : cases) {
    auto r = run_dprun(c.command + " --help");
    EXPECT_EQ(r.status, 0) << c.command;
    EXPECT_EQ(r.output.rfind(c.usage, 0), 0u) << r.output;
    EXPECT_NE(r.output.find(c.has), std::string::npos) << r.output;
    for (const std::string& other : c.lacks)
      EXPECT_EQ(r.output.find(other), std::string::npos) << c.command << " shows " << other;
    // The simulated devices are a testing aid: one line at most, pointing at the docs.
    EXPECT_EQ(count_of(r.output, "sim:"),
              c.command == "inspect" || c.command == "convert" ? 0u : 1u)
        << r.output;
    EXPECT_EQ(run_dprun("help " + c.command).output, r.output) << c.command;
  }
  // A model without a command is run's, its help too; --help anywhere in the line.
  EXPECT_EQ(run_dprun(source_path("models/mlp.onnx") + " --help").output,
            run_dprun("run --help").output);
  EXPECT_EQ(run_dprun("train " + source_path("models/mlp.onnx") + " --batch 4 --help").output,
            run_dprun("train --help").output);
  expect_usage_error(run_dprun("help trian"), "help: 'trian' is not a command");
}

TEST(CliEdges, UnknownFlagsSuggestTheNearestValidOne) {
  const std::string model = source_path("models/mlp.onnx");
  expect_usage_error(run_dprun(model + " --device cpu:0"),
                     "unknown option '--device' (did you mean --devices?)");
  expect_usage_error(run_dprun("bench " + model + " --iter 3"),
                     "unknown option '--iter' (did you mean --iters?)");
  expect_usage_error(run_dprun("train " + model + " --optimiser sgd"),
                     "unknown option '--optimiser' (did you mean --optimizer?)");
  expect_usage_error(run_dprun(model + " --bogus"), "unknown option '--bogus' (see --help)");
}

TEST(CliEdges, BadDevicesSuggestADevice) {
  const std::string model = source_path("models/mlp.onnx");
  expect_usage_error(run_dprun(model + " --devices cude:0"),
                     "--devices: invalid device 'cude:0': expected cpu[:N], cuda[:N] or sim[:N] "
                     "(did you mean cuda:0?)");
  expect_usage_error(run_dprun(model + " --devices cpu:0,cpu:O"),
                     "--devices: invalid device 'cpu:O': the index must be a non-negative "
                     "integer (did you mean cpu:0?)");
  expect_usage_error(run_dprun(model + " --devices cpu:0 --output-device cpuu:0"),
                     "--output-device: invalid device 'cpuu:0': expected cpu[:N], cuda[:N] or "
                     "sim[:N] (did you mean cpu:0?)");
  // Nothing close: no guess.
  expect_usage_error(run_dprun(model + " --devices metal:0"),
                     "--devices: invalid device 'metal:0': expected cpu[:N], cuda[:N] or sim[:N]");
}

TEST(CliEdges, AWrongInputNameListsTheModelsInputs) {
  const std::string ids = source_path("models/transformer.input.input_ids.npy");
  expect_usage_error(
      run_dprun(source_path("models/transformer.onnx") +
                " --devices cpu:0 --input input_id=" + ids),
      "--input names 'input_id', which is not an input of the model (did you mean 'input_ids'? "
      "its inputs: input_ids, attention_mask)");
  expect_usage_error(
      run_dprun(source_path("models/transformer.onnx") + " --devices cpu:0 --input pixels=" + ids),
      "--input names 'pixels', which is not an input of the model (its inputs: input_ids, "
      "attention_mask)");
}

TEST(CliEdges, ARunsTimeLeavesOutTheFirstRunsSetup) {
  auto r = run_dprun(source_path("models/mlp.onnx") + " --devices cpu:0");
  ASSERT_EQ(r.status, 0) << r.output;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(
      r.output, m,
      std::regex(R"(\ntime: ([0-9.]+) ms per run \(1 run; first run ([0-9.]+) ms, including )"
                 R"(setup\)\n$)")))
      << r.output;
  // The first run builds the plan's buffers and kernels: slower than the steady one.
  EXPECT_GT(std::stod(m[2].str()), std::stod(m[1].str())) << r.output;
  r = run_dprun(source_path("models/mlp.onnx") + " --devices cpu:0 --iters 3");
  EXPECT_TRUE(std::regex_search(
      r.output, std::regex(R"(\ntime: [0-9.]+ ms per run \(3 runs; first run [0-9.]+ ms, )")))
      << r.output;
}

}  // namespace
}  // namespace dprun::testing
