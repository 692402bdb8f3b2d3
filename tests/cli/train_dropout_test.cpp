// Training with Dropout repeats: the masks come from --seed (a stream per batch, rank and
// replica), so two runs with one seed give the same losses and model, another seed gives
// others, and a resumed run ends bit for bit as the uninterrupted one.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "cli_test_util.h"

namespace dprun::testing {
namespace {

namespace fs = std::filesystem;

class TrainDropout : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = scratch_path("dprun_train_dropout");
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // `dprun train mlp_dropout.onnx` on mlp_sgd's data; OUT.onnx and OUT.json in the scratch
  // folder. Returns the run's per-step losses.
  std::vector<double> train(const std::string& out, const std::string& options,
                            const std::string& model = {}) {
    const std::string data = source_path("models/training/mlp_sgd");
    CommandResult r = run_dprun(
        "train " + (model.empty() ? source_path("models/training/mlp_dropout.onnx") : model) +
        " --input x=" + data + ".x.npy --target " + data +
        ".target.npy --loss cross_entropy --optimizer sgd --momentum 0.9" + options + " --save " +
        (dir_ / out).string() + ".onnx --json " + (dir_ / out).string() + ".json");
    EXPECT_EQ(r.status, 0) << r.output;
    last_output_ = r.output;
    return numbers(read_json(dir_ / (out + ".json")), "losses").value_or(std::vector<double>{});
  }

  fs::path dir_;
  std::string last_output_;
};

TEST_F(TrainDropout, OneSeedGivesOneRunAndAnotherSeedAnother) {
  for (const char* devices : {"cpu:0", "cpu:0,cpu:1"}) {
    SCOPED_TRACE(devices);
    const std::string on =
        std::string(" --shuffle --batch 10 --lr 0.1 --steps 6 --devices ") + devices;
    const std::vector<double> a = train("a", on + " --seed 7");
    const std::vector<double> b = train("b", on + " --seed 7");
    const std::vector<double> c = train("c", on + " --seed 8");
    ASSERT_EQ(a.size(), 6u);
    EXPECT_EQ(a, b);
    EXPECT_EQ(read_text(dir_ / "a.onnx"), read_text(dir_ / "b.onnx"));
    EXPECT_NE(a, c);
  }
  // The masks differ from one step to the next: the same batch twice gives two losses.
  const std::vector<double> same_batch = train("d", " --steps 2 --no-shuffle --batch 25 --lr 0");
  ASSERT_EQ(same_batch.size(), 2u);
  EXPECT_NE(same_batch[0], same_batch[1]);
}

TEST_F(TrainDropout, AResumedRunDrawsTheMasksOfTheUninterruptedOne) {
  const std::string on = " --shuffle --batch 10 --lr 0.1 --devices cpu:0,cpu:1 --seed 3";
  const std::vector<double> whole = train("whole", on + " --steps 8");
  const std::vector<double> first = train("first", on + " --steps 3 --checkpoint-every 3");
  const std::vector<double> rest =
      train("rest", on + " --steps 8 --resume", (dir_ / "first.ckpt.onnx").string());
  ASSERT_EQ(whole.size(), 8u);
  EXPECT_EQ(first, std::vector<double>(whole.begin(), whole.begin() + 3));
  EXPECT_EQ(rest, std::vector<double>(whole.begin() + 3, whole.end()));
  EXPECT_EQ(read_text(dir_ / "rest.onnx"), read_text(dir_ / "whole.onnx"));

  const std::string checkpoint = (dir_ / "first.ckpt.onnx").string();
  const std::string data = source_path("models/training/mlp_sgd");
  CommandResult other_seed = run_dprun(
      "train " + checkpoint + " --input x=" + data + ".x.npy --target " + data +
      ".target.npy --loss cross_entropy --optimizer sgd --lr 0.1 --momentum 0.9 --batch 10 "
      "--shuffle --devices cpu:0,cpu:1 --seed 4 --steps 8 --resume --save " +
      (dir_ / "refused.onnx").string());
  EXPECT_EQ(other_seed.status, 1);
  EXPECT_EQ(other_seed.output,
            "dprun: error: " + checkpoint +
                ": was trained with --seed 3: resume with the same --seed (it orders the data "
                "and draws the Dropout masks)\n");
}

}  // namespace
}  // namespace dprun::testing
