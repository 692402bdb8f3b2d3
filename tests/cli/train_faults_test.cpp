// `dprun train` refuses what would make a run silently wrong, each with one line naming it:
// a resume with other settings than the checkpoint's, a checkpoint changed anywhere (sealed
// edits reach the field checks behind the checksum), an update that leaves a parameter not
// finite (nothing is saved for that step), NaN, infinities and unknown class labels in the
// data, negative numbers for the optimizer's options and directories given for files.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <limits>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "cli_test_util.h"
#include "engine/training/checkpoint_checksum.h"
#include "loader/npy.h"
#include "loader/onnx_loader.h"

namespace dprun::testing {
namespace {

namespace fs = std::filesystem;

const std::string kData = source_path("models/training/mlp_sgd");

class TrainFaults : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = scratch_path("dprun_train_faults");
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string path(const std::string& name) const { return (dir_ / name).string(); }

  // `dprun train MODEL` on mlp_sgd's data (25 rows of 12 features, 5 classes) with `options`,
  // saving OUT.onnx in the scratch folder.
  CommandResult train(const std::string& model, const std::string& options,
                      const std::string& out = "out") {
    return run_dprun("train " + model + " --loss cross_entropy " + options + " --save " +
                     path(out + ".onnx"));
  }
  CommandResult train_data(const std::string& options, const std::string& x = kData + ".x.npy",
                           const std::string& target = kData + ".target.npy") {
    return train(kData + ".onnx", "--input x=" + x + " --target " + target + " " + options);
  }

  // Expects exit 1 and exactly "dprun: error: MESSAGE".
  static void expect_error(const CommandResult& r, const std::string& message) {
    EXPECT_EQ(r.status, 1) << r.output;
    EXPECT_EQ(r.output, "dprun: error: " + message + "\n");
  }
  // Expects exit 1 and the line "dprun: error: MESSAGE" (after lines the run printed).
  static void expect_error_line(const CommandResult& r, const std::string& message) {
    EXPECT_EQ(r.status, 1) << r.output;
    EXPECT_NE(r.output.find("dprun: error: " + message + "\n"), std::string::npos) << r.output;
  }

  fs::path dir_;
};

constexpr char kAdam[] = "--optimizer adam --lr 0.01 --batch 10 --no-shuffle --devices cpu:0";

// A resume with another setting that changes the run's arithmetic is refused naming the
// option, the saved value and the given one; the lr and its schedule may change.
TEST_F(TrainFaults, AResumeWithOtherSettingsIsRefusedNamingTheOption) {
  ASSERT_EQ(train_data(std::string(kAdam) + " --steps 4 --checkpoint-every 2").status, 0);
  const std::string ckpt = path("out.ckpt.onnx");
  const std::string resume = " --input x=" + kData + ".x.npy --target " + kData +
                             ".target.npy --resume --steps 6 --devices cpu:0 ";
  auto refused = [&](const std::string& options, const std::string& message) {
    SCOPED_TRACE(options);
    const CommandResult r = train(ckpt, resume + options, "resumed");
    expect_error(r, ckpt + ": " + message);
    EXPECT_FALSE(fs::exists(path("resumed.onnx")));
  };
  const std::string adam = "--optimizer adam --lr 0.01 --batch 10 --no-shuffle ";
  refused("--optimizer adamw --lr 0.01 --batch 10 --no-shuffle",
          "was trained with --optimizer adam; resume with the same --optimizer (got adamw)");
  refused("--optimizer sgd --momentum 0.9 --lr 0.01 --batch 10 --no-shuffle",
          "was trained with --optimizer adam; resume with the same --optimizer (got sgd)");
  refused(adam + "--precision float16",
          "was trained with --precision float32; resume with the same --precision (got "
          "float16)");
  refused("--optimizer adam --lr 0.01 --batch 5 --no-shuffle",
          "was trained with --batch 10; resume with the same --batch (got 5)");
  refused(adam + "--accumulate 2",
          "was trained with --accumulate 1; resume with the same --accumulate (got 2)");
  refused(adam + "--betas 0.8,0.999",
          "was trained with --betas 0.9,0.999; resume with the same --betas (got 0.8,0.999)");
  refused(adam + "--eps 1e-6",
          "was trained with --eps 1e-08; resume with the same --eps (got 1e-06)");
  refused(adam + "--weight-decay 0.1",
          "was trained with --weight-decay 0; resume with the same --weight-decay (got 0.1)");
  refused(adam + "--label-smoothing 0.1",
          "was trained with --label-smoothing 0; resume with the same --label-smoothing (got 0.1)");
  refused(adam + "--ignore-index none",
          "was trained with --ignore-index -100; resume with the same --ignore-index (got none)");
  refused(adam + "--clip-grad-norm 1",
          "was trained with --clip-grad-norm none; resume with the same --clip-grad-norm (got 1)");
  refused(adam + "--freeze fc2.bias",
          "was trained with --freeze none; resume with the same --freeze (got fc2.bias)");
  refused("--optimizer adam --lr 0.01 --batch 10 --shuffle",
          "was trained without --shuffle; resume without it");
  // The lr and its schedule are the user's to change, as after a PyTorch load_state_dict.
  const CommandResult r = train(
      ckpt,
      resume + "--optimizer adam --lr 0.005 --batch 10 --no-shuffle --lr-schedule step:1:0.5");
  EXPECT_EQ(r.status, 0) << r.output;
}

// A checkpoint's state as read back, to edit: its graph with the "dprun.state." entries.
std::shared_ptr<Graph> load_state(const std::string& path) {
  return load_graph(path);
}

// Saves `graph` with its checksum made again, as if dprun had written the edited state.
void save_sealed(Graph& graph, const std::string& path) {
  graph.initializers[kCheckpointChecksum] =
      Tensor::scalar<int64_t>(static_cast<int64_t>(checkpoint_checksum(graph.initializers)));
  save_graph(graph, {}, path);
}

// A changed byte anywhere in the state is "damaged"; a state edited and sealed again is checked
// field by field: never a crash, one line naming the entry.
TEST_F(TrainFaults, ADamagedOrInconsistentCheckpointIsRefusedNamingWhatIsWrong) {
  const std::string sgd =
      "--optimizer sgd --momentum 0.9 --lr 0.01 --batch 10 --no-shuffle --devices cpu:0";
  ASSERT_EQ(train_data(sgd + " --steps 4 --checkpoint-every 4").status, 0);
  const std::string ckpt = path("out.ckpt.onnx"), edited = path("edited.ckpt.onnx");
  auto refused = [&](const std::string& message) {
    const CommandResult r = train(
        edited,
        "--input x=" + kData + ".x.npy --target " + kData + ".target.npy --resume --steps 6 " + sgd,
        "resumed");
    expect_error(r, edited + ": " + message);
    EXPECT_FALSE(fs::exists(path("resumed.onnx")));
  };
  const std::string damaged = "its contents do not match its checksum: the checkpoint is damaged";
  const std::string momentum = "dprun.state.optimizer.momentum_buffer.fc1.weight";
  {  // one bit of a momentum buffer
    auto g = load_state(ckpt);
    g->initializers.at(momentum).data<float>()[3] *= -1.0f;
    save_graph(*g, {}, edited);
    refused(damaged);
  }
  {  // a setting's text
    auto g = load_state(ckpt);
    g->initializers.at("dprun.state.run.optimizer").data<uint8_t>()[0] = 'x';
    save_graph(*g, {}, edited);
    refused(damaged);
  }
  {  // a negative step, unsealed: damaged; sealed: named
    auto g = load_state(ckpt);
    g->initializers.at("dprun.state.step") = Tensor::scalar<int64_t>(-3);
    save_graph(*g, {}, edited);
    refused(damaged);
    save_sealed(*g, edited);
    refused("the state's step is -3: the checkpoint is damaged");
  }
  {
    auto g = load_state(ckpt);
    g->initializers.at("dprun.state.optimizer.steps") = Tensor::scalar<int64_t>(3);
    save_sealed(*g, edited);
    refused(
        "the state's optimizer steps (3) do not fit its step 4 with 0 skipped: the checkpoint "
        "is damaged");
  }
  {
    auto g = load_state(ckpt);
    g->initializers.at("dprun.state.step") = Tensor::scalar<float>(4.0f);
    save_sealed(*g, edited);
    refused("its 'dprun.state.step' is float32[], not one int64: the checkpoint is damaged");
  }
  {  // a buffer for a parameter the model does not have
    auto g = load_state(ckpt);
    g->initializers["dprun.state.optimizer.momentum_buffer.fc9.weight"] =
        g->initializers.at(momentum);
    save_sealed(*g, edited);
    refused(
        "holds 'dprun.state.optimizer.momentum_buffer.fc9.weight' for parameter 'fc9.weight', "
        "which this run does not train");
  }
  {  // a buffer of another shape
    auto g = load_state(ckpt);
    g->initializers.at(momentum) = Tensor::zeros({3, 12}, DType::Float32);
    save_sealed(*g, edited);
    refused("its '" + momentum +
            "' is float32[3, 12] but parameter 'fc1.weight' is float32[16, 12]: the checkpoint "
            "is damaged");
  }
  {  // a buffer missing
    auto g = load_state(ckpt);
    g->initializers.erase(momentum);
    save_sealed(*g, edited);
    refused("has no '" + momentum + "' for the optimizer: the checkpoint is damaged");
  }
  {  // an entry this dprun does not write
    auto g = load_state(ckpt);
    g->initializers["dprun.state.extra"] = Tensor::scalar<int64_t>(1);
    save_sealed(*g, edited);
    refused(
        "holds 'dprun.state.extra', which this dprun does not write: the checkpoint is "
        "damaged or from another version");
  }
}

// An update that leaves a parameter not finite stops the run at that step, naming it, and
// saves nothing for it: the model and checkpoint of the last finite step stay as they were.
TEST_F(TrainFaults, AnUpdateToANonFiniteParameterStopsTheRunBeforeItSaves) {
  const std::string sgd = "--optimizer sgd --batch 10 --no-shuffle --devices cpu:0";
  expect_error_line(train_data(sgd + " --lr 1e39 --steps 1"),
                    "step 1: parameter 'fc1.bias' is not finite after the update; training "
                    "diverged (try a smaller --lr)");
  EXPECT_FALSE(fs::exists(path("out.onnx")));
  ASSERT_EQ(train_data(sgd + " --lr 0.1 --steps 2 --checkpoint-every 1").status, 0);
  const std::string model = read_text(path("out.onnx")), ckpt = read_text(path("out.ckpt.onnx"));
  const CommandResult r =
      train(path("out.ckpt.onnx"), "--input x=" + kData + ".x.npy --target " + kData +
                                       ".target.npy --resume --steps 4 --checkpoint-every 1 --lr "
                                       "1e39 " +
                                       sgd);
  expect_error_line(r,
                    "step 3: parameter 'fc1.bias' is not finite after the update; training "
                    "diverged (try a smaller --lr)");
  EXPECT_EQ(read_text(path("out.onnx")), model);
  EXPECT_EQ(read_text(path("out.ckpt.onnx")), ckpt);
  // Two devices update in the fused pass: the same check.
  expect_error_line(train_data("--optimizer sgd --batch 10 --no-shuffle --devices cpu:0,cpu:1 --lr "
                               "1e39 --steps 1 --momentum 0.9"),
                    "step 1: parameter 'fc1.bias' is not finite after the update; training "
                    "diverged (try a smaller --lr)");
  // float16 steps whose gradients overflow are skipped, not an error.
  const CommandResult half = train_data(
      sgd + " --lr 0.1 --steps 2 --precision float16 --loss-scale 1e30", kData + ".x.npy");
  EXPECT_EQ(half.status, 0) << half.output;
  EXPECT_NE(half.output.find("2 of 2 steps skipped for overflowing gradients"), std::string::npos)
      << half.output;
}

// A copy of mlp_sgd's data with value `v` at row `row`, column 2, saved as NAME.npy.
std::string x_with(const fs::path& dir, const std::string& name, int64_t row, float v) {
  Tensor x = read_npy(kData + ".x.npy");
  x.data<float>()[row * x.dim(1) + 2] = v;
  const std::string out = (dir / (name + ".npy")).string();
  write_npy(x, out);
  return out;
}

// NaN and infinities in the data and labels the model has no class for are named at load, by
// file and row (from 0), before any step.
TEST_F(TrainFaults, BadValuesInTheDataAreNamedByFileAndRowBeforeTraining) {
  const std::string sgd = "--optimizer sgd --lr 0.1 --batch 10 --steps 2 --devices cpu:0";
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  const std::string x_nan = x_with(dir_, "x_nan", 17, nan);
  expect_error(train_data(sgd, x_nan), x_nan + ": row 17 holds NaN: training needs finite numbers");
  const std::string x_inf = x_with(dir_, "x_inf", 3, -inf);
  expect_error(train_data(sgd, x_inf), x_inf + ": row 3 holds -inf: training needs finite numbers");
  const std::string val_inf = x_with(dir_, "val_inf", 24, inf);
  expect_error(
      train_data(sgd + " --val-input x=" + val_inf + " --val-target " + kData + ".target.npy"),
      val_inf + ": row 24 holds inf: training needs finite numbers");
  {  // a float target (mse) with a NaN in row 5
    Tensor target = Tensor::zeros({25, 5}, DType::Float32);
    target.data<float>()[5 * 5 + 4] = nan;
    write_npy(target, path("t_nan.npy"));
    const CommandResult r =
        run_dprun("train " + kData + ".onnx --loss mse --input x=" + kData + ".x.npy --target " +
                  path("t_nan.npy") + " " + sgd + " --save " + path("out.onnx"));
    expect_error(r, path("t_nan.npy") + ": row 5 holds NaN: training needs finite numbers");
  }
  Tensor labels = read_npy(kData + ".target.npy");
  labels.data<int64_t>()[13] = 5;
  write_npy(labels, path("t5.npy"));
  expect_error(train_data(sgd, kData + ".x.npy", path("t5.npy")),
               path("t5.npy") +
                   ": row 13 holds class 5, outside [0, 5) of output 'logits' and is not the "
                   "--ignore-index -100");
  expect_error(train_data(sgd + " --ignore-index none", kData + ".x.npy", path("t5.npy")),
               path("t5.npy") + ": row 13 holds class 5, outside [0, 5) of output 'logits'");
  labels.data<int64_t>()[13] = -100;  // the ignore index: accepted
  write_npy(labels, path("t_ignored.npy"));
  EXPECT_FALSE(fs::exists(path("out.onnx")));  // no refused run saved anything
  const CommandResult ignored = train_data(sgd, kData + ".x.npy", path("t_ignored.npy"));
  EXPECT_EQ(ignored.status, 0) << ignored.output;
}

// Numbers the optimizer cannot take are usage errors (exit 2); a folder given for a data file
// is named as one.
TEST_F(TrainFaults, NegativeNumbersAreUsageErrorsAndFoldersAreNamed) {
  const std::string base = "--batch 10 --steps 1 --devices cpu:0 ";
  const std::vector<std::pair<std::string, std::string>> refused = {
      {"sgd --lr -1", "--lr must be a number >= 0, got '-1'"},
      {"sgd --lr nan", "--lr must be a number, got 'nan'"},
      {"sgd --lr 0.1 --momentum -0.9", "--momentum must be a number >= 0, got '-0.9'"},
      {"adam --lr 0.1 --weight-decay -1", "--weight-decay must be a number >= 0, got '-1'"},
      {"adam --lr 0.1 --eps -1e-8", "--eps must be a number >= 0, got '-1e-8'"},
      {"adam --lr 0.1 --betas 0.9,1", "--betas: 0.9,1 are not two numbers in [0, 1)"}};
  for (const auto& [options, message] : refused)
    expect_usage_error(train_data(base + "--optimizer " + options), message);
  const std::string folder = dir_.string();
  expect_error(train_data(base + "--optimizer sgd --lr 0.1", folder),
               folder + ": is a directory; --input takes a .npy file");
  expect_error(train_data(base + "--optimizer sgd --lr 0.1", kData + ".x.npy", folder),
               folder + ": is a directory; --target takes a .npy file");
  expect_error(train_data(base + "--optimizer sgd --lr 0.1 --val-input x=" + folder +
                          " --val-target " + kData + ".target.npy"),
               folder + ": is a directory; --val-input takes a .npy file");
}

}  // namespace
}  // namespace dprun::testing
