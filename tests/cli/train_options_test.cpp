// `dprun train`'s learning-rate schedule, weight-decay exemption, gradient clipping and
// accumulation options: each bad
// value is a usage error naming it, a run reports what it used in --json, and accumulated
// batches train as one batch of their rows. Their values against
// PyTorch's are checked by the models/training cases mlp_warmup_cosine_dp2, mlp_step_adam and
// mlp_clip_dp3 (tests/cli/train_references_test.cpp).
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "cli_test_util.h"
#include "loader/npy.h"
#include "loader/onnx_loader.h"

namespace dprun::testing {
namespace {

namespace fs = std::filesystem;

/// `dprun train` on the mlp_sgd data with SGD at lr 0.1 and `options`, writing out.onnx and
/// run.json into `dir`.
std::string mlp_command(const fs::path& dir, const std::string& options) {
  const std::string data = source_path("models/training/mlp_sgd");
  return "train " + data + ".onnx --input x=" + data + ".x.npy --target " + data +
         ".target.npy --loss cross_entropy --optimizer sgd --lr 0.1 --save " +
         (dir / "out.onnx").string() + " --json " + (dir / "run.json").string() + " " + options;
}

/// 4 steps of batches of 10 on cpu:0, in order, and `more`.
std::string train_command(const fs::path& dir, const std::string& more) {
  return mlp_command(dir, "--batch 10 --steps 4 --no-shuffle --devices cpu:0" + more);
}

TEST(TrainOptions, BadSchedulesClippingAndAccumulationAreUsageErrors) {
  const fs::path dir = scratch_path("dprun_train_options_errors");
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::vector<std::pair<std::string, std::string>> errors = {
      {" --lr-schedule cosin",
       "--lr-schedule: lr schedule 'cosin' is not constant, step:SIZE[:GAMMA], "
       "exponential:GAMMA, cosine[:ETA_MIN] or linear[:END_FACTOR]"},
      {" --lr-schedule step:0",
       "--lr-schedule: lr schedule 'step:0': the step size is not a "
       "positive whole number"},
      {" --lr-warmup -1", "--lr-warmup must be between 0 and 1099511627776, got -1"},
      {" --lr-warmup-start 0.5", "--lr-warmup-start requires --lr-warmup"},
      {" --lr-warmup 2 --lr-warmup-start 0", "--lr-warmup-start: 0 is not in (0, 1]"},
      {" --clip-grad-norm 0", "--clip-grad-norm: 0 is not a positive number"},
      {" --clip-grad-norm inf", "--clip-grad-norm must be a number, got 'inf'"},
      {" --accumulate 0", "--accumulate must be between 1 and 1048576, got 0"},
      {" --label-smoothing 2", "--label-smoothing: 2 is not between 0 and 1"},
      {" --ignore-index x", "--ignore-index must be an integer, got 'x'"},
      {" --no-weight-decay fc1.bias",
       "--no-weight-decay exempts parameters from a weight decay "
       "of 0"},
      {" --weight-decay 0.1 --no-weight-decay fc1.bias,fc3*",
       "--no-weight-decay: 'fc3*' names no trainable parameter"},
      {" --param-lr fc3*=0.1", "--param-lr: 'fc3*' names no trainable parameter"},
      {" --param-lr fc1.weight", "--param-lr: 'fc1.weight' is not PATTERN=LR"},
      {" --param-lr =0.1", "--param-lr: '=0.1' is not PATTERN=LR"},
      {" --param-lr fc1.weight=fast", "--param-lr must be a number, got 'fast'"},
      {" --param-lr fc1.weight=-0.5",
       "--param-lr: 'fc1.weight=-0.5' gives an lr that is not a number >= 0"},
      {" --param-lr fc1*=0.1,fc1.bias=0.2",
       "--param-lr: 'fc1.bias' is in two groups, 'fc1*' and 'fc1.bias'"},
  };
  for (const auto& [options, message] : errors) {
    SCOPED_TRACE(options);
    expect_usage_error(run_dprun(train_command(dir, options)), message);
    EXPECT_FALSE(fs::exists(dir / "out.onnx")) << "a usage error left a model behind";
  }
  fs::remove_all(dir);
}

// Without a schedule every step has the given lr and no grad_norms are listed; with one, the
// JSON lists each step's lr (StepLR: halved every 2 steps) and, with clipping, each norm.
TEST(TrainOptions, TheJsonListsEachStepsLearningRateAndNorm) {
  const fs::path dir = scratch_path("dprun_train_options_json");
  fs::remove_all(dir);
  fs::create_directories(dir);
  CommandResult r = run_dprun(train_command(dir, ""));
  ASSERT_EQ(r.status, 0) << r.output;
  nlohmann::json report = read_json(dir / "run.json");
  EXPECT_EQ(numbers(report, "lrs"), std::vector<double>(4, 0.1)) << report;
  EXPECT_FALSE(report.contains("grad_norms")) << report;

  r = run_dprun(train_command(dir, " --lr-schedule step:2:0.5 --clip-grad-norm 0.25"));
  ASSERT_EQ(r.status, 0) << r.output;
  report = read_json(dir / "run.json");
  EXPECT_EQ(numbers(report, "lrs"), (std::vector<double>{0.1, 0.1, 0.05, 0.05})) << report;
  const std::vector<double> norms = numbers(report, "grad_norms").value_or(std::vector<double>{});
  ASSERT_EQ(norms.size(), 4u) << report;
  for (double norm : norms) EXPECT_GT(norm, 0.25) << "the case clips every step: " << report;
  fs::remove_all(dir);
}

/// The losses and trained initializers of `dprun train` on the mlp_sgd data with `options`.
struct Trained {
  std::vector<double> losses;
  std::shared_ptr<Graph> model;
};
Trained train_mlp(const fs::path& dir, const std::string& options) {
  CommandResult r =
      run_dprun(mlp_command(dir, "--momentum 0.9 --no-shuffle --devices cpu:0,cpu:1 " + options));
  EXPECT_EQ(r.status, 0) << r.output;
  return {numbers(read_json(dir / "run.json"), "losses").value_or(std::vector<double>{}),
          load_graph((dir / "out.onnx").string())};
}

/// Expects `parts` to have trained as `whole`: the losses within 1e-6 of theirs, the
/// initializers within `absolute` + `relative` times their size.
void expect_trained_as(const Trained& parts, const Trained& whole, double relative,
                       double absolute) {
  ASSERT_EQ(parts.losses.size(), whole.losses.size());
  for (size_t s = 0; s < whole.losses.size(); ++s)
    EXPECT_NEAR(parts.losses[s], whole.losses[s], 1e-6 * whole.losses[s]) << "step " << s + 1;
  for (const auto& [name, want] : whole.model->initializers) {
    const Tensor& got = parts.model->initializers.at(name);
    for (int64_t i = 0; i < want.numel(); ++i)
      ASSERT_NEAR(got.item_as_double(i), want.item_as_double(i),
                  absolute + relative * std::fabs(want.item_as_double(i)))
          << name << "[" << i << "]";
  }
}

// Two batches of 5 rows summed into one step are one batch of 10 (the model has no
// BatchNormalization): the same losses and parameters within float rounding, in one process and
// as one rank of a distributed run, which sums its batches' gradients and then the ranks' once.
TEST(TrainOptions, AccumulatingTwoBatchesTrainsAsOneOfTheirRows) {
  const fs::path dir = scratch_path("dprun_train_options_accumulate");
  fs::remove_all(dir);
  fs::create_directories(dir);
  const Trained whole = train_mlp(dir, "--batch 10 --steps 2");
  ASSERT_EQ(whole.losses.size(), 2u);
  for (const std::string distributed : {"", " --distributed"}) {
    SCOPED_TRACE(distributed);
    expect_trained_as(train_mlp(dir, "--batch 5 --accumulate 2 --steps 2" + distributed), whole,
                      1e-5, 1e-6);
  }
  fs::remove_all(dir);
}

// With ignored targets, accumulated batches weigh their share of the step's counted targets,
// not of its rows: models/training/gpt_ragged_dp3's batches of 4 rows count 18 and 3 targets
// (weights 6/7 and 1/7, where rows would give 1/2 each), then 12 and 15. Two of them per step
// train as one batch of 8 on one device: the same losses within 1e-6 and parameters within
// 1e-6 relative, 1e-7 absolute (float rounding: measured at most 9e-8), in one process on one
// and on three devices and as one rank of a distributed run.
TEST(TrainOptions, AccumulatedBatchesWithIgnoredTargetsTrainAsOneOfTheirRows) {
  const fs::path dir = scratch_path("dprun_train_options_accumulate_ignored");
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::string data = source_path("models/training/gpt_ragged_dp3");
  auto train = [&](const std::string& options) -> Trained {
    CommandResult r = run_dprun(
        "train " + data + ".onnx --input idx=" + data + ".idx.npy --target " + data +
        ".target.npy --loss cross_entropy --class-dim -1 --label-smoothing 0.1 --optimizer sgd "
        "--lr 0.5 --momentum 0.9 --steps 3 --no-shuffle --save " +
        (dir / "out.onnx").string() + " --json " + (dir / "run.json").string() + " " + options);
    EXPECT_EQ(r.status, 0) << r.output;
    return {numbers(read_json(dir / "run.json"), "losses").value_or(std::vector<double>{}),
            load_graph((dir / "out.onnx").string())};
  };
  const Trained whole = train("--batch 8 --devices cpu:0");
  ASSERT_EQ(whole.losses.size(), 3u);
  for (const std::string options :
       {"--devices cpu:0", "--devices cpu:0,cpu:1,cpu:2", "--devices cpu:0 --distributed"}) {
    SCOPED_TRACE(options);
    expect_trained_as(train("--batch 4 --accumulate 2 " + options), whole, 1e-6, 1e-7);
  }
  fs::remove_all(dir);
}

// With --epochs, a step takes --accumulate batches of the epochs' sequence: 25 rows in batches
// of 5 are 5 batches an epoch, so one epoch is 3 steps, the last running into the next pass.
TEST(TrainOptions, AnEpochOfAccumulatedStepsEndsInTheStepOfItsLastBatch) {
  const fs::path dir = scratch_path("dprun_train_options_accumulate_epochs");
  fs::remove_all(dir);
  fs::create_directories(dir);
  CommandResult r =
      run_dprun(mlp_command(dir, "--batch 5 --accumulate 2 --epochs 1 --devices cpu:0"));
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("5 batches of 5 per epoch, 3 steps\n"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("\nepoch 1: loss "), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("epoch 2"), std::string::npos) << r.output;
  EXPECT_EQ(numbers(read_json(dir / "run.json"), "losses").value_or(std::vector<double>{}).size(),
            3u);
  fs::remove_all(dir);
}

// A run stopped after a checkpoint and resumed from it ends with the model, bit for bit, of
// the run that did not stop, and reports the losses of the steps it ran: the optimizer's
// buffers and step count, the float16 loss scaler (whose first steps overflow here) and the
// shuffled data order all continue. A state that does not fit is refused, naming the file.
TEST(TrainOptions, AResumedRunEndsAsTheUninterruptedOne) {
  const fs::path dir = scratch_path("dprun_train_options_resume");
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::string data = source_path("models/training/mlp_sgd");
  const std::string common = " --input x=" + data + ".x.npy --target " + data +
                             ".target.npy --loss cross_entropy --lr 0.01 --batch 10 --shuffle "
                             "--seed 3 --lr-schedule step:1:0.9 --devices cpu:0,cpu:1 "
                             "--precision float16 --loss-scale 1e9 --loss-scale-growth-interval 2";
  auto run = [&](const std::string& model, const std::string& options, const std::string& out,
                 const std::string& optimizer = "adam") {
    return run_dprun("train " + model + common + " --optimizer " + optimizer + options +
                     " --save " + (dir / out).string() + ".onnx --json " + (dir / out).string() +
                     ".json");
  };
  CommandResult whole = run(data + ".onnx", " --steps 16", "whole");
  ASSERT_EQ(whole.status, 0) << whole.output;
  CommandResult first = run(data + ".onnx", " --steps 7 --checkpoint-every 7", "first");
  ASSERT_EQ(first.status, 0) << first.output;
  const std::string checkpoint = (dir / "first.ckpt.onnx").string();
  ASSERT_TRUE(fs::exists(checkpoint));
  CommandResult rest = run(checkpoint, " --steps 16 --resume", "rest");
  ASSERT_EQ(rest.status, 0) << rest.output;
  EXPECT_NE(rest.output.find("resuming " + checkpoint + " at step 8\n"), std::string::npos)
      << rest.output;
  EXPECT_EQ(read_text(dir / "rest.onnx"), read_text(dir / "whole.onnx"));
  const nlohmann::json whole_report = read_json(dir / "whole.json");
  const std::vector<double> losses =
      numbers(whole_report, "losses").value_or(std::vector<double>{});
  ASSERT_EQ(losses.size(), 16u) << whole_report;
  EXPECT_EQ(numbers(read_json(dir / "rest.json"), "losses"),
            std::vector<double>(losses.begin() + 7, losses.end()));
  const std::vector<double> skipped =
      numbers(whole_report, "skipped_steps").value_or(std::vector<double>{});
  ASSERT_FALSE(skipped.empty()) << "the scale never overflowed: " << whole_report;
  // Nothing but the two files is left in the folder: no temporary file survives a save.
  std::set<std::string> files;
  for (const auto& entry : fs::directory_iterator(dir))
    files.insert(entry.path().filename().string());
  EXPECT_EQ(files, (std::set<std::string>{"first.ckpt.onnx", "first.json", "first.onnx",
                                          "rest.json", "rest.onnx", "whole.json", "whole.onnx"}));

  auto expect_refused = [&](const std::string& model, const std::string& options,
                            const std::string& message, const std::string& optimizer = "adam") {
    CommandResult r = run(model, options, "refused", optimizer);
    EXPECT_EQ(r.status, 1) << r.output;
    EXPECT_EQ(r.output, "dprun: error: " + message + "\n");
    EXPECT_FALSE(fs::exists(dir / "refused.onnx"));
  };
  const std::string not_a_checkpoint =
      ": is not a checkpoint (it holds no training state): --resume continues from the "
      "OUT.ckpt.onnx that --checkpoint-every writes beside --save OUT.onnx";
  expect_refused(data + ".onnx", " --steps 16 --resume", data + ".onnx" + not_a_checkpoint);
  expect_refused((dir / "whole.onnx").string(), " --steps 16 --resume",
                 (dir / "whole.onnx").string() + not_a_checkpoint);
  const std::string cut = (dir / "cut.ckpt.onnx").string();
  {  // a checkpoint cut short
    std::ofstream out(cut, std::ios::binary);
    out << read_text(checkpoint).substr(0, 100);
  }
  expect_refused(cut, " --steps 16 --resume",
                 cut + ": not a valid ONNX protobuf (malformed or truncated)");
  {  // a parameter changed after the state was written
    std::shared_ptr<Graph> damaged = load_graph(checkpoint);
    Tensor& weight = damaged->initializers.at("fc1.weight");
    weight.data<float>()[0] += 1.0f;
    save_graph(*damaged, {}, cut);
  }
  expect_refused(cut, " --steps 16 --resume",
                 cut + ": its contents do not match its checksum: the checkpoint is damaged");
  expect_refused(checkpoint, " --steps 7 --resume",
                 "--resume: the checkpoint is at step 7; a run of 7 steps has none left");
  expect_refused(checkpoint, " --steps 16 --resume",
                 checkpoint +
                     ": was trained with --optimizer adam; resume with the same --optimizer "
                     "(got sgd)",
                 "sgd --momentum 0.9");
  fs::remove_all(dir);
}

}  // namespace
}  // namespace dprun::testing

namespace dprun::testing {
namespace {

/// The cnn_bn_1dev case (a CNN with two training-mode BatchNorms, batch 10, 3 SGD steps) on
/// `devices` with `more`, its losses from --json.
std::vector<double> cnn_bn_losses(const fs::path& dir, const std::string& devices,
                                  const std::string& more) {
  const std::string data = source_path("models/training/cnn_bn_1dev");
  const CommandResult r = run_dprun(
      "train " + data + ".onnx --input x=" + data + ".x.npy --target " + data +
      ".target.npy --loss cross_entropy --optimizer sgd --lr 0.1 --momentum 0.9 --batch 10 "
      "--steps 3 --no-shuffle --devices " +
      devices + " --save " + (dir / "out.onnx").string() + " --json " +
      (dir / "run.json").string() + more);
  EXPECT_EQ(r.status, 0) << r.output;
  return numbers(read_json(dir / "run.json"), "losses").value_or(std::vector<double>{});
}

TEST(TrainOptions, SyncBatchNormTrainsThreeDevicesAsPyTorchTrainsOne) {
  const fs::path dir = scratch_path("dprun_train_sync_bn");
  fs::remove_all(dir);
  fs::create_directories(dir);
  // PyTorch's losses on one device, the whole batch in each BatchNorm.
  const Tensor torch_losses = read_npy(source_path("models/training/cnn_bn_1dev.losses.npy"));
  const std::vector<double> synced = cnn_bn_losses(dir, "cpu:0,cpu:1,cpu:2", " --sync-batchnorm");
  const std::vector<double> apart = cnn_bn_losses(dir, "cpu:0,cpu:1,cpu:2", "");
  ASSERT_EQ(synced.size(), 3u);
  ASSERT_EQ(apart.size(), 3u);
  for (size_t s = 0; s < 3; ++s)
    EXPECT_NEAR(synced[s], torch_losses.item_as_double(static_cast<int64_t>(s)),
                1e-4 * torch_losses.item_as_double(static_cast<int64_t>(s)))
        << "step " << s;
  // Chunks of 4, 4 and 2 rows normalized apart train another model.
  EXPECT_GT(std::abs(apart[1] - torch_losses.item_as_double(1)), 1e-3);

  // Each refusal is named whole, the rest of the command line being complete.
  const std::string complete = "train " + source_path("models/training/cnn_bn_1dev.onnx") +
                               " --input x=x.npy --target y.npy --loss cross_entropy"
                               " --optimizer sgd --lr 0.1 --batch 2 --steps 1 --save " +
                               (dir / "s.onnx").string() + " --sync-batchnorm";
  expect_usage_error(run_dprun(complete + " --distributed"),
                     "--sync-batchnorm excludes --distributed");
  expect_usage_error(run_dprun(complete + " --export-training-graph " + (dir / "t.onnx").string()),
                     "--sync-batchnorm excludes --export-training-graph");
  fs::remove_all(dir);
}

}  // namespace
}  // namespace dprun::testing
