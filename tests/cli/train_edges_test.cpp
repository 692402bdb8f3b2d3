// `dprun train`'s messages: a target that does not fit the output the loss reads is named with
// the model's outputs and --output; progress lines without a terminal (--log-every); the summary
// says its loss is the last batch's.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <regex>
#include <string>

#include "cli_test_util.h"
#include "engine/graph.h"
#include "loader/npy.h"
#include "loader/onnx_loader.h"
#include "op_test_util.h"

namespace dprun::testing {
namespace {

namespace fs = std::filesystem;

SymbolicShape batch_of(int64_t width) {
  return SymbolicShape{Dim::named("batch"), Dim::known(width)};
}

// hidden = x @ w1 (float32[batch, 8]), logits = hidden @ w2 (float32[batch, 3]): two outputs,
// the first not the one a 3-wide target is for.
void write_two_output_model(const fs::path& path) {
  Graph g;
  g.name = "two_outputs";
  g.opset_imports[""] = 13;
  g.inputs.push_back({"x", {DType::Float32, batch_of(4)}});
  g.initializers["w1"] = random_floats({4, 8}, 3);
  g.initializers["w2"] = random_floats({8, 3}, 4);
  g.nodes = {make_node("MatMul", {"x", "w1"}, {"hidden"}),
             make_node("MatMul", {"hidden", "w2"}, {"logits"})};
  g.outputs.push_back({"hidden", {DType::Float32, batch_of(8)}});
  g.outputs.push_back({"logits", {DType::Float32, batch_of(3)}});
  save_graph(g, {}, path.string());
}

class TrainEdges : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = scratch_path("dprun_train_edges");
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    write_two_output_model(dir_ / "model.onnx");
    write_npy(random_floats({12, 4}, 5), (dir_ / "x.npy").string());
    write_npy(random_floats({12, 3}, 6), (dir_ / "y.npy").string());
  }
  void TearDown() override { fs::remove_all(dir_); }
  // A train command on the fixture's data, with `extra` options after `rows` (batch, devices).
  std::string train(const std::string& extra,
                    const std::string& rows = "--batch 4 --devices cpu:0,cpu:1") const {
    return "train " + (dir_ / "model.onnx").string() + " --input x=" + (dir_ / "x.npy").string() +
           " --target " + target() + " --loss mse --optimizer sgd --lr 0.01 " + rows + " --save " +
           (dir_ / "out.onnx").string() + " " + extra;
  }
  std::string target() const { return (dir_ / "y.npy").string(); }
  fs::path dir_;
};

TEST_F(TrainEdges, ATargetForAnotherOutputNamesTheOutputsAndOutput) {
  auto r = run_dprun(train("--steps 1"));
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_EQ(r.output.substr(r.output.find("dprun: error:")),
            "dprun: error: --target " + target() +
                " holds [12, 3], but --loss mse on output 'hidden' [batch, 8] needs targets of "
                "shape [batch, 8] (a row per sample); the model's outputs: hidden [batch, 8], "
                "logits [batch, 3]: name the one the loss reads with --output NAME\n");
  EXPECT_FALSE(fs::exists(dir_ / "out.onnx"));
  r = run_dprun(train("--steps 1 --output logits"));
  EXPECT_EQ(r.status, 0) << r.output;
}

TEST_F(TrainEdges, LogEveryPrintsAProgressLineEveryNStepsWithoutATerminal) {
  auto r = run_dprun(train("--output logits --steps 4 --log-every 2"));
  ASSERT_EQ(r.status, 0) << r.output;
  const std::regex line(R"(\nstep (\d)/4: loss [0-9.]+ \(this batch\), [0-9.]+ samples/s\n)");
  std::vector<std::string> steps;
  for (auto it = std::sregex_iterator(r.output.begin(), r.output.end(), line);
       it != std::sregex_iterator(); ++it)
    steps.push_back((*it)[1].str());
  EXPECT_EQ(steps, (std::vector<std::string>{"2", "4"})) << r.output;

  // By default a line comes every 10 seconds only: none in a short run, and no bar.
  r = run_dprun(train("--output logits --steps 4"));
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_FALSE(std::regex_search(r.output, std::regex(R"(\nstep \d)"))) << r.output;
  EXPECT_EQ(r.output.find('\r'), std::string::npos) << r.output;
  expect_usage_error(run_dprun(train("--output logits --steps 4 --log-every 0")),
                     "--log-every must be between 1 and 1099511627776, got 0");
}

TEST_F(TrainEdges, OnATerminalTheBarIsRedrawnAtMostFiveTimesASecond) {
  // `script` gives the command a terminal; 2000 steps of one row take about a second or two,
  // a redraw per step would draw 2000 bars.
  const std::string command = std::string(DPRUN_BINARY) + " " +
                              train("--output logits --steps 2000", "--batch 1 --devices cpu:0");
  const auto start = std::chrono::steady_clock::now();
  auto r = run_shell("script -qec '" + command + "' /dev/null");
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ASSERT_EQ(r.status, 0) << r.output;
  size_t bars = 0;
  for (size_t at = r.output.find("] step "); at != std::string::npos;
       at = r.output.find("] step ", at + 1))
    ++bars;
  EXPECT_GE(bars, 1u) << r.output;
  EXPECT_LE(static_cast<double>(bars), 5 * seconds + 2) << seconds << " s\n" << r.output;
  EXPECT_NE(r.output.find("] step 2000/2000 "), std::string::npos) << r.output;  // the last
}

TEST_F(TrainEdges, AWrongInputNameListsTheModelsInputs) {
  expect_usage_error(run_dprun(train("--output logits --steps 1 --input z=" + target())),
                     "--input names 'z', which is not an input of the model (its inputs: x)");
}

TEST_F(TrainEdges, TheSummaryNamesItsLossTheLastBatchs) {
  auto r = run_dprun(train("--output logits --epochs 1"));
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_TRUE(std::regex_search(
      r.output, std::regex(R"(\nepoch 1: loss [0-9.]+, [0-9.]+ samples/s\nlast batch loss )"
                           R"([0-9.]+, [0-9.]+ samples/s after 1 warm-up step \([0-9.]+ )"
                           R"(overall\); saved )")))
      << r.output;
}

}  // namespace
}  // namespace dprun::testing
