// The library's checkpoints (engine/training/checkpoint_state.h, loader/checkpoint_file.h),
// without the CLI: a checkpoint written, read back and restored into a fresh run equals the
// original state, and each refusal names the field that does not fit.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>

#include "bundled_model_util.h"
#include "engine/training/checkpoint_checksum.h"
#include "engine/training/trainer.h"
#include "error_test_util.h"
#include "loader/checkpoint_file.h"
#include "loader/npy.h"
#include "loader/onnx_loader.h"

namespace dprun {
namespace {

namespace fs = std::filesystem;

bool bitwise_equal(const Tensor& a, const Tensor& b) {
  const Tensor x = a.to(Device::cpu()), y = b.to(Device::cpu());
  return x.dtype() == y.dtype() && x.shape() == y.shape() &&
         std::memcmp(x.raw_data(), y.raw_data(), x.nbytes()) == 0;
}

// A run of the tutorial classifier with Adam, as an application would make it.
struct AdamRun {
  explicit AdamRun(std::shared_ptr<Model> m, double lr = 1e-2) : model(std::move(m)) {
    options.training.loss.kind = LossKind::CrossEntropy;
    trainer = std::make_unique<Trainer>(model, options);
    adam = std::make_unique<Adam>(trainer->parameters(), AdamOptions{.lr = lr});
  }
  CheckpointedRun checkpointed(uint64_t seed = 3) const {
    return {.model = *model,
            .parameter_names = trainer->parameter_names(),
            .optimizer = *adam,
            .seed = seed,
            .settings = run_settings(options, *model, *trainer, *adam, 64, 1, false)};
  }

  TrainerOptions options;
  std::shared_ptr<Model> model;
  std::unique_ptr<Trainer> trainer;
  std::unique_ptr<Adam> adam;
};

class TrainingCheckpoint : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("dprun_training_checkpoint_" + std::to_string(getpid()));
    fs::create_directories(dir_);
    path_ = (dir_ / "run.ckpt.onnx").string();
    const std::string tutorial = testing::bundled_model_path("tutorial/classifier.train");
    original_ = std::make_unique<AdamRun>(std::make_shared<Model>(load_model(tutorial)));
    const std::string data = tutorial.substr(0, tutorial.rfind('/')) + "/train.";
    const Tensor x = read_npy(data + "x.npy"), y = read_npy(data + "y.npy");
    for (int64_t step = 0; step < 3; ++step)
      original_->trainer->step({x.narrow(0, 64 * step, 64)}, y.narrow(0, 64 * step, 64),
                               *original_->adam);
    save_checkpoint(path_, original_->checkpointed(), 3);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // A fresh run of the checkpoint's model, and what restoring `checkpoint` into it says.
  std::string restore_error(const Checkpoint& checkpoint, AdamRun& run, uint64_t seed = 3) {
    return testing::error_of(
        [&] { restore_training_state(checkpoint, "ckpt", run.checkpointed(seed)); });
  }
  // `checkpoint` with its checksum made to match again after an edit.
  static void reseal(Checkpoint& checkpoint) {
    const int64_t sealed = 1234;
    checkpoint.state["checksum"] = Tensor::scalar<int64_t>(sealed);
    checkpoint.checksum = static_cast<uint64_t>(sealed);
  }

  fs::path dir_;
  std::string path_;
  std::unique_ptr<AdamRun> original_;
};

TEST_F(TrainingCheckpoint, PathSitsBesideTheSavedModel) {
  EXPECT_EQ(checkpoint_path("out/model.onnx"), "out/model.ckpt.onnx");
  EXPECT_EQ(checkpoint_path("model"), "model.ckpt.onnx");
}

TEST_F(TrainingCheckpoint, ReadBackAndRestoredEqualsTheOriginalState) {
  const Checkpoint checkpoint = read_checkpoint(path_);
  AdamRun resumed(std::make_shared<Model>(checkpoint.graph, Device::cpu()));
  EXPECT_EQ(restore_training_state(checkpoint, path_, resumed.checkpointed()), 3);
  // The parameters, by name, and the optimizer's steps and buffers, bitwise.
  ASSERT_EQ(resumed.model->parameter_names(), original_->model->parameter_names());
  for (size_t i = 0; i < original_->model->parameters().size(); ++i)
    EXPECT_TRUE(bitwise_equal(resumed.model->parameters()[i], original_->model->parameters()[i]))
        << original_->model->parameter_names()[i];
  const Optimizer::State want = original_->adam->state(), got = resumed.adam->state();
  EXPECT_EQ(got.steps, 3);
  ASSERT_EQ(got.buffers.size(), want.buffers.size());
  ASSERT_FALSE(want.buffers.empty());
  for (const auto& [name, buffer] : want.buffers)
    EXPECT_TRUE(bitwise_equal(got.buffers.at(name), buffer)) << name;
  // The state is out of the graph: the model's own initializers only.
  for (const auto& [name, value] : checkpoint.graph->initializers)
    EXPECT_NE(name.rfind("dprun.state.", 0), 0u) << name;
}

TEST_F(TrainingCheckpoint, AModelWithoutStateIsNotACheckpoint) {
  const std::string plain = (dir_ / "plain.onnx").string();
  save_model(*original_->model, plain);
  EXPECT_EQ(testing::error_of([&] { read_checkpoint(plain); }),
            plain +
                ": is not a checkpoint (it holds no training state): --resume continues from the "
                "OUT.ckpt.onnx that --checkpoint-every writes beside --save OUT.onnx");
}

// A value changed in the file (a parameter here), without its checksum made again.
TEST_F(TrainingCheckpoint, AChangedValueIsDamage) {
  std::shared_ptr<Graph> graph = load_graph(path_);
  Tensor& weight = graph->initializers.at(original_->trainer->parameter_names()[0]);
  weight.data<float>()[0] += 1;
  save_graph(*graph, {}, path_);
  const Checkpoint checkpoint = read_checkpoint(path_);
  AdamRun resumed(std::make_shared<Model>(checkpoint.graph, Device::cpu()));
  EXPECT_EQ(restore_error(checkpoint, resumed),
            "ckpt: its contents do not match its checksum: the checkpoint is damaged");
  EXPECT_EQ(resumed.adam->state().steps, 0);  // nothing loaded
}

// Each field of the state, changed (and the checksum sealed again), is named.
TEST_F(TrainingCheckpoint, EachRefusalNamesTheField) {
  const Checkpoint read = read_checkpoint(path_);
  AdamRun resumed(std::make_shared<Model>(read.graph, Device::cpu()));
  const std::string weight = resumed.trainer->parameter_names()[0];
  auto refusal = [&](auto edit) {
    Checkpoint c = read;
    edit(c);
    reseal(c);
    return restore_error(c, resumed);
  };
  EXPECT_EQ(refusal([](Checkpoint& c) { c.state["step"] = Tensor::scalar<int64_t>(-1); }),
            "ckpt: the state's step is -1: the checkpoint is damaged");
  EXPECT_EQ(refusal([](Checkpoint& c) { c.state["step"] = Tensor::scalar<int64_t>(5); }),
            "ckpt: the state's optimizer steps (3) do not fit its step 5 with 0 skipped: the "
            "checkpoint is damaged");
  EXPECT_EQ(refusal([](Checkpoint& c) { c.state["step"] = Tensor::scalar<float>(3); }),
            "ckpt: its 'dprun.state.step' is float32[], not one int64: the checkpoint is damaged");
  EXPECT_EQ(refusal([](Checkpoint& c) { c.state["extra"] = Tensor::scalar<int64_t>(0); }),
            "ckpt: holds 'dprun.state.extra', which this dprun does not write: the checkpoint is "
            "damaged or from another version");
  EXPECT_EQ(refusal([&](Checkpoint& c) { c.state.erase("optimizer.exp_avg." + weight); }),
            "ckpt: has no 'dprun.state.optimizer.exp_avg." + weight +
                "' for the optimizer: the checkpoint is damaged");
  EXPECT_EQ(refusal([&](Checkpoint& c) {
              c.state["optimizer.exp_avg.nothing"] = c.state.at("optimizer.exp_avg." + weight);
            }),
            "ckpt: holds 'dprun.state.optimizer.exp_avg.nothing' for parameter 'nothing', which "
            "this run does not train");
  const Tensor w = resumed.trainer->parameters()[0];
  EXPECT_EQ(refusal([&](Checkpoint& c) {
              c.state["optimizer.exp_avg." + weight] = Tensor::scalar<float>(0);
            }),
            "ckpt: its 'dprun.state.optimizer.exp_avg." + weight +
                "' is float32[] but parameter '" + weight + "' is float32" +
                shape_to_string(w.shape()) + ": the checkpoint is damaged");
  EXPECT_EQ(refusal([](Checkpoint& c) {
              const std::string adamw = "adamw";
              c.state["run.optimizer"] = Tensor::from_vector<uint8_t>(
                  {5}, std::vector<uint8_t>(adamw.begin(), adamw.end()));
            }),
            "ckpt: was trained with --optimizer adamw; resume with the same --optimizer (got "
            "adam)");
  EXPECT_EQ(refusal([](Checkpoint& c) { c.state.erase("run.batch"); }),
            "ckpt: has no 'dprun.state.run.batch': it was written by an older dprun or is damaged");
  EXPECT_EQ(restore_error(read, resumed, 9),
            "ckpt: was trained with --seed 3: resume with the same --seed (it orders the data and "
            "draws the Dropout masks)");
  EXPECT_EQ(resumed.adam->state().steps, 0);  // no refusal loaded anything
}

// A setting of the resuming run other than the checkpoint's: the batch, the precision.
TEST_F(TrainingCheckpoint, ARunOfOtherSettingsIsRefusedNamingTheSetting) {
  const Checkpoint checkpoint = read_checkpoint(path_);
  AdamRun resumed(std::make_shared<Model>(checkpoint.graph, Device::cpu()));
  CheckpointedRun batch = resumed.checkpointed();
  for (RunSetting& s : batch.settings)
    if (s.option == "batch") s.value = "32";
  EXPECT_EQ(testing::error_of([&] { restore_training_state(checkpoint, "ckpt", batch); }),
            "ckpt: was trained with --batch 64; resume with the same --batch (got 32)");
  CheckpointedRun precision = resumed.checkpointed();
  precision.settings[0].value = "float16";
  EXPECT_EQ(precision.settings[0].option, "precision");
  EXPECT_EQ(testing::error_of([&] { restore_training_state(checkpoint, "ckpt", precision); }),
            "ckpt: was trained with --precision float32; resume with the same --precision (got "
            "float16)");
}

TEST_F(TrainingCheckpoint, AKilledSaveLeavesNoTemporaryAfterTheNextRunStarts) {
  const fs::path stale = dir_ / ".run.ckpt.onnx.AbC123", other = dir_ / ".run.ckpt.onnx.keep";
  std::ofstream(stale) << "half";
  std::ofstream(other) << "not ours";
  remove_stale_temporaries(path_);
  EXPECT_FALSE(fs::exists(stale));
  EXPECT_TRUE(fs::exists(other));
  EXPECT_TRUE(fs::exists(path_));
}

}  // namespace
}  // namespace dprun
