// An initializer the graph also lists as an input is an input with a default: --input replaces
// its value in run (and bench and train, which read inputs the same way), inspect lists it as
// optional, and a file of another shape is refused naming both. The model is dprun's own
// exported training graph, whose `loss_weight` is such an input.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "cli_test_util.h"
#include "loader/npy.h"

namespace dprun::testing {
namespace {

namespace fs = std::filesystem;

TEST(InitializerInputs, InputOverridesTheDefaultOfAnInitializerListedAsAnInput) {
  const fs::path dir = scratch_path("dprun_initializer_inputs");
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::string data = source_path("models/training/mlp_sgd");
  const std::string graph = (dir / "training_graph.onnx").string();
  CommandResult exported =
      run_dprun("train " + data + ".onnx --input x=" + data + ".x.npy --target " + data +
                ".target.npy --loss cross_entropy --optimizer sgd --lr 0.1 --batch 10 --steps 1 "
                "--devices cpu:0 --save " +
                (dir / "trained.onnx").string() + " --export-training-graph " + graph);
  ASSERT_EQ(exported.status, 0) << exported.output;

  CommandResult inspect = run_dprun("inspect " + graph);
  EXPECT_NE(inspect.output.find("loss_weight              float32[] (optional, has a default)"),
            std::string::npos)
      << inspect.output;

  auto loss_with = [&](const std::string& extra) {
    const fs::path out = dir / "out";
    fs::remove_all(out);
    CommandResult r = run_dprun("run " + graph + " --devices cpu:0 --input x=" + data +
                                ".x.npy --input target=" + data + ".target.npy" + extra +
                                " --output-dir " + out.string());
    EXPECT_EQ(r.status, 0) << r.output;
    return read_npy((out / "loss.npy").string()).item_as_double();
  };
  const double by_default = loss_with("");
  write_npy(Tensor::scalar<float>(0.25f), (dir / "quarter.npy").string());
  const double quartered = loss_with(" --input loss_weight=" + (dir / "quarter.npy").string());
  EXPECT_GT(by_default, 0.5);  // an untrained classifier's cross entropy
  EXPECT_DOUBLE_EQ(quartered, static_cast<double>(static_cast<float>(by_default) * 0.25f));

  write_npy(Tensor::from_vector<float>({2}, {1, 2}), (dir / "two.npy").string());
  CommandResult wrong = run_dprun("run " + graph + " --devices cpu:0 --input x=" + data +
                                  ".x.npy --input target=" + data +
                                  ".target.npy --input loss_weight=" + (dir / "two.npy").string());
  EXPECT_EQ(wrong.status, 2);
  EXPECT_EQ(wrong.output,
            "dprun: error: --input 'loss_weight' overrides an initializer of float32[], "
            "but " +
                (dir / "two.npy").string() + " holds float32[2]\n");
  fs::remove_all(dir);
}

}  // namespace
}  // namespace dprun::testing
