// `dprun train --layout/--normalize/--augment` on uint8 channels-last images: each sample is
// augmented by (--seed, epoch, its row), so a run equals, bit for bit, the same run on the
// file-order transforms written as float32 beforehand, on one device or two and with
// --accumulate; a resumed run ends as the uninterrupted one; the model saved with
// --embed-preprocessing takes the uint8 file and gives what `dprun run --layout --normalize`
// gives on the model saved without; bad options get one line and write nothing.
#include <gtest/gtest.h>

#include <filesystem>
#include <random>
#include <string>

#include "cli_test_util.h"
#include "engine/training/training_data.h"
#include "loader/npy.h"

namespace dprun::testing {
namespace {

namespace fs = std::filesystem;

constexpr int64_t kRows = 24;
const std::string kNormalize = "x=0.49,0.48,0.45/0.25,0.24,0.26";
const std::string kAugment = "x=hflip,crop:2,cutout:3";

class TrainTransforms : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = scratch_path("dprun_train_transforms");
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    std::mt19937 rng(7);
    std::vector<uint8_t> pixels(static_cast<size_t>(kRows * 8 * 8 * 3));
    for (uint8_t& p : pixels) p = static_cast<uint8_t>(rng() % 256);
    std::vector<int64_t> labels(static_cast<size_t>(kRows));
    for (int64_t& l : labels) l = static_cast<int64_t>(rng() % 4);
    write_npy(Tensor::from_vector<uint8_t>({kRows, 8, 8, 3}, pixels), path("x.npy"));
    write_npy(Tensor::from_vector<int64_t>({kRows}, labels), path("y.npy"));
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string path(const std::string& name) const { return (dir_ / name).string(); }

  // `dprun train` of the CNN on FILE (x) with `options`; OUT.onnx and OUT.json.
  CommandResult train(const std::string& file, const std::string& options,
                      const std::string& out) const {
    return run_dprun("train " + source_path("models/training/cnn_bn_1dev.onnx") +
                     " --input x=" + path(file) + " --target " + path("y.npy") +
                     " --loss cross_entropy --optimizer sgd --lr 0.05 --momentum 0.9 --seed 11 " +
                     options + " --save " + path(out + ".onnx") + " --json " + path(out + ".json"));
  }
  std::vector<double> losses(const std::string& out) const {
    return numbers(read_json(dir_ / (out + ".json")), "losses").value_or(std::vector<double>{});
  }

  // Epoch 0's samples as the run transforms them, in file order, written as float32.
  void write_transformed_epoch(const std::string& name) const {
    TrainingDataOptions options{.batch = kRows, .seed = 11};
    parse_layout("x", "nhwc", options.transforms["x"]);
    parse_normalize("x", kNormalize.substr(2), options.transforms["x"]);
    parse_augment("x", kAugment.substr(2), options.transforms["x"]);
    TrainingData data({"x"}, {read_npy(path("x.npy"))}, Tensor(), options);
    write_npy(data.batch(0, 0).inputs[0], path(name));
  }

  fs::path dir_;
};

TEST_F(TrainTransforms, AugmentedRunsEqualRunsOnTheTransformedFileOnAnyDevicesAndAccumulation) {
  write_transformed_epoch("transformed.npy");
  const std::string transforms =
      " --layout x=nhwc --normalize " + kNormalize + " --augment " + kAugment;
  for (const std::string& options :
       {std::string("--batch 8 --steps 3 --no-shuffle --devices cpu:0"),
        std::string("--batch 8 --steps 3 --no-shuffle --devices cpu:0,cpu:1"),
        std::string("--batch 4 --accumulate 2 --steps 3 --no-shuffle --devices cpu:0,cpu:1")}) {
    CommandResult augmented = train("x.npy", options + transforms, "augmented");
    ASSERT_EQ(augmented.status, 0) << augmented.output;
    CommandResult stored = train("transformed.npy", options, "stored");
    ASSERT_EQ(stored.status, 0) << stored.output;
    ASSERT_EQ(losses("augmented").size(), 3u) << options;
    // The batches are gathered on a background thread; each step's wait for them is reported.
    const std::vector<double> waits =
        numbers(read_json(dir_ / "augmented.json"), "data_wait_seconds")
            .value_or(std::vector<double>{});
    ASSERT_EQ(waits.size(), 3u) << options;
    for (double w : waits) EXPECT_GE(w, 0) << options;
    EXPECT_EQ(losses("augmented"), losses("stored")) << options;
    EXPECT_EQ(read_text(dir_ / "augmented.onnx"), read_text(dir_ / "stored.onnx")) << options;
  }
  // Without the augmentation the samples differ: the test above can tell.
  CommandResult plain = train("x.npy",
                              "--batch 8 --steps 3 --no-shuffle --devices cpu:0 --layout x=nhwc "
                              "--normalize " +
                                  kNormalize,
                              "plain");
  ASSERT_EQ(plain.status, 0) << plain.output;
  CommandResult stored = train("transformed.npy",
                               "--batch 8 --steps 3 --no-shuffle "
                               "--devices cpu:0",
                               "stored");
  EXPECT_NE(losses("plain"), losses("stored"));
}

TEST_F(TrainTransforms, AResumedAugmentedRunEndsAsTheUninterruptedOne) {
  const std::string options =
      "--batch 8 --shuffle --devices cpu:0,cpu:1 --layout x=nhwc "
      "--normalize " +
      kNormalize + " --augment " + kAugment;
  CommandResult whole = train("x.npy", options + " --steps 7", "whole");  // over 3 epochs
  ASSERT_EQ(whole.status, 0) << whole.output;
  CommandResult first = train("x.npy", options + " --steps 4 --checkpoint-every 4", "first");
  ASSERT_EQ(first.status, 0) << first.output;
  const std::string checkpoint = path("first.ckpt.onnx");
  CommandResult rest = run_dprun(
      "train " + checkpoint + " --resume --input x=" + path("x.npy") + " --target " +
      path("y.npy") + " --loss cross_entropy --optimizer sgd --lr 0.05 --momentum 0.9 --seed 11 " +
      options + " --steps 7 --save " + path("rest.onnx") + " --json " + path("rest.json"));
  ASSERT_EQ(rest.status, 0) << rest.output;
  const std::vector<double> all = losses("whole");
  ASSERT_EQ(all.size(), 7u);
  EXPECT_EQ(losses("rest"), std::vector<double>(all.begin() + 4, all.end()));
  EXPECT_EQ(read_text(dir_ / "rest.onnx"), read_text(dir_ / "whole.onnx"));

  CommandResult changed = run_dprun(
      "train " + checkpoint + " --resume --input x=" + path("x.npy") + " --target " +
      path("y.npy") + " --loss cross_entropy --optimizer sgd --lr 0.05 --momentum 0.9 --seed 11 " +
      "--batch 8 --shuffle --devices cpu:0,cpu:1 --layout x=nhwc --normalize " + kNormalize +
      " --augment x=hflip --steps 7 --save " + path("changed.onnx"));
  EXPECT_EQ(changed.status, 1) << changed.output;
  EXPECT_EQ(changed.output.substr(changed.output.find("dprun: error:")),
            "dprun: error: " + checkpoint + ": was trained with --augment " + kAugment +
                "; resume with the same --augment (got x=hflip)\n");
  EXPECT_FALSE(fs::exists(dir_ / "changed.onnx"));
}

TEST_F(TrainTransforms, TheEmbeddedPreprocessingGivesThePipelinesOutputs) {
  const std::string options =
      "--batch 8 --steps 2 --no-shuffle --devices cpu:0 --layout x=nhwc "
      "--normalize " +
      kNormalize + " --augment " + kAugment;
  ASSERT_EQ(train("x.npy", options + " --embed-preprocessing", "embedded").status, 0);
  ASSERT_EQ(train("x.npy", options, "plain").status, 0);
  CommandResult converted = run_dprun("convert " + path("plain.onnx") +
                                      " --embed-preprocessing --layout x=nhwc --normalize " +
                                      kNormalize + " --save " + path("converted.onnx"));
  ASSERT_EQ(converted.status, 0) << converted.output;
  auto run = [&](const std::string& model, const std::string& extra, const std::string& out) {
    CommandResult r = run_dprun("run " + path(model) + " --input x=" + path("x.npy") + " " + extra +
                                " --output-dir " + path(out));
    EXPECT_EQ(r.status, 0) << r.output;
  };
  run("plain.onnx", "--layout x=nhwc --normalize " + kNormalize, "pipeline");
  run("embedded.onnx", "", "embedded");
  run("converted.onnx", "", "converted");
  const std::string want = read_text(dir_ / "pipeline" / "logits.npy");
  ASSERT_FALSE(want.empty());
  EXPECT_EQ(read_text(dir_ / "embedded" / "logits.npy"), want);
  EXPECT_EQ(read_text(dir_ / "converted" / "logits.npy"), want);
  // The served model takes uint8 NHWC rows.
  const Tensor x = read_npy(path("x.npy"));
  CommandResult inspect = run_dprun("inspect " + path("embedded.onnx"));
  EXPECT_NE(inspect.output.find("uint8"), std::string::npos) << inspect.output;
  EXPECT_EQ(x.dtype(), DType::UInt8);
}

TEST_F(TrainTransforms, BadOptionsGetOneLineAndWriteNothing) {
  const std::string base = "--batch 8 --steps 1 --devices cpu:0 ";
  auto refused = [&](const std::string& options, int status, const std::string& message) {
    CommandResult r = train("x.npy", base + options, "out");
    EXPECT_EQ(r.status, status) << options << "\n" << r.output;
    EXPECT_EQ(r.output, "dprun: error: " + message + "\n") << options;
    EXPECT_FALSE(fs::exists(dir_ / "out.onnx")) << options;
  };
  refused("--layout x=nhwc --normalize x=0.5,0.5/0.2,0.2", 2,
          "--normalize x=0.5,0.5/0.2,0.2: 2 means and stds for the 3 channels of input 'x'");
  refused("--layout x=nhwc --augment x=hflip,mirror", 2,
          "--augment x=hflip,mirror: unknown augmentation 'mirror' (hflip, crop:PAD, "
          "resized-crop:SIZE, cutout:SIZE)");
  refused("--layout x=nhwc --normalize x=0.5/x", 2, "--normalize x=0.5/x: 'x' is not a number");
  refused("--layout x=nhwc --augment x=cutout:9", 1,
          "--augment x=cutout:9: cutout:9 is larger than the 8x8 image");
  refused("--layout y=nhwc", 2, "--layout names 'y', which is not an input of the model");
  refused("--normalize x=0.5/0.2", 2,
          "--normalize x=0.5/0.2: 1 mean and std for the 3 channels of input 'x'");
  refused("--augment x=crop:2", 1,
          "input 'x' of the model is [batch, 3, 8, 8], but its transformed samples are [8, 8, 3]");
}

TEST_F(TrainTransforms, ModelsWithoutImageInputsRefuseLayoutAndAugmentation) {
  const std::string mlp = source_path("models/training/mlp_sgd");
  auto refused = [&](const std::string& options, const std::string& message) {
    CommandResult r =
        run_dprun("train " + mlp + ".onnx --input x=" + mlp + ".x.npy --target " + mlp +
                  ".target.npy --loss cross_entropy --optimizer sgd --lr 0.1 "
                  "--batch 8 --steps 1 " +
                  options + " --save " + path("out.onnx"));
    expect_usage_error(r, message);
    EXPECT_FALSE(fs::exists(dir_ / "out.onnx"));
  };
  refused("--layout x=nhwc",
          "--layout x=nhwc: input 'x' of the model is [batch, 12]; nhwc is for images, [batch, "
          "C, H, W]");
  refused("--augment x=hflip",
          "--augment x=hflip: input 'x' of the model is [batch, 12]; augmentation is for images, "
          "[batch, C, H, W]");
}

}  // namespace
}  // namespace dprun::testing
