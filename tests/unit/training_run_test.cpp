// TrainingRun (engine/training/training_run.h): the run `dprun train` makes, as a library
// type. Its steps are checked against a loop of Trainer::step written out here, its saves and
// callbacks by recording them, and its divergence stop by its message.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "engine/random_seed.h"
#include "engine/training/training_run.h"
#include "error_test_util.h"
#include "loader/npy.h"
#include "loader/onnx_loader.h"
#include "sim_drop_wait_util.h"

namespace dprun {
namespace {

std::string training_file(const std::string& name) {
  const char* root = std::getenv("DPRUN_SOURCE_DIR");
  return std::string(root ? root : DPRUN_SOURCE_DIR_DEFAULT) + "/models/training/" + name;
}

// mlp_sgd (12 features, 5 classes) on its 25 rows in batches of 5, cross entropy, SGD with
// momentum, on two CPU devices unless told others: everything a run needs, made afresh for each
// run.
struct RunParts {
  std::vector<Device> devices;
  std::shared_ptr<Model> model;
  Trainer trainer;
  Sgd sgd;
  TrainingData data{{"x"},
                    {read_npy(training_file("mlp_sgd.x.npy"))},
                    read_npy(training_file("mlp_sgd.target.npy")),
                    {.batch = 5}};
  CheckpointedRun state{
      .model = *model, .parameter_names = trainer.parameter_names(), .optimizer = sgd};

  explicit RunParts(double lr = 0.1, std::vector<Device> on = {Device::cpu(0), Device::cpu(1)})
      : devices(std::move(on)),
        model(std::make_shared<Model>(load_model(training_file("mlp_sgd.onnx"), devices[0]))),
        trainer(model,
                [this] {
                  TrainerOptions options;
                  options.training.loss.kind = LossKind::CrossEntropy;
                  options.parallel.device_ids = devices;
                  return options;
                }()),
        sgd(trainer.parameters(), {.lr = lr, .momentum = 0.5}) {}

  std::vector<std::vector<float>> parameters() const {
    std::vector<std::vector<float>> values;
    for (const Tensor& p : trainer.parameters()) {
      const Tensor host = p.to(Device::cpu());
      values.emplace_back(host.data<float>(), host.data<float>() + host.numel());
    }
    return values;
  }
};

// The losses of `steps` steps of a loop of Trainer::step written out (batch k of each epoch in
// turn, each forward pass seeded from the run's seed 3, rank 0 and the batch's index): each
// batch is gathered on the host and scattered by the step itself.
std::vector<double> loop_losses(RunParts& loop, int64_t steps) {
  std::vector<double> losses;
  for (int64_t step = 0; step < steps; ++step) {
    const Batch b = loop.data.batch(step / 5, step % 5);
    loop.trainer.set_random_seed(derive_seed(derive_seed(3, 0), static_cast<uint64_t>(step)));
    losses.push_back(loop.trainer.step(b.inputs, b.target, loop.sgd));
  }
  return losses;
}

// What a run asked its writer to save, in order: "model@3", "checkpoint@3", ...
struct RecordingWriter : TrainingRunWriter {
  std::vector<std::string> saves;
  void save_model(const Model&, int64_t steps) override {
    saves.push_back("model@" + std::to_string(steps));
  }
  void save_checkpoint(const CheckpointedRun&, int64_t steps) override {
    saves.push_back("checkpoint@" + std::to_string(steps));
  }
};

TEST(TrainingRun, StepsAsALoopOfTrainerStepsDoes) {
  RunParts run, loop;
  const std::vector<StepRecord> records =
      TrainingRun(run.trainer, run.sgd, run.data, run.state, {.steps = 7, .seed = 3}).run();
  const std::vector<double> losses = loop_losses(loop, 7);
  ASSERT_EQ(records.size(), 7u);
  for (size_t i = 0; i < 7; ++i) {
    EXPECT_EQ(records[i].loss, losses[i]) << "step " << i + 1;
    EXPECT_EQ(records[i].rows, 5);
    EXPECT_EQ(records[i].lr, 0.1);
  }
  EXPECT_EQ(run.parameters(), loop.parameters());
}

// On an accelerator the background thread copies the next step's batches to the first device on
// a stream of its own: the same steps as the loop, whose steps copy their batches themselves.
TEST(TrainingRun, OnAcceleratorsTheBatchesCopiedAheadGiveTheLoopsSteps) {
  const std::vector<Device> sims = {Device::sim(0), Device::sim(1)};
  RunParts run(0.1, sims), loop(0.1, sims);
  const std::vector<StepRecord> records =
      TrainingRun(run.trainer, run.sgd, run.data, run.state, {.steps = 7, .seed = 3}).run();
  const std::vector<double> losses = loop_losses(loop, 7);
  ASSERT_EQ(records.size(), 7u);
  for (size_t i = 0; i < 7; ++i) EXPECT_EQ(records[i].loss, losses[i]) << "step " << i + 1;
  EXPECT_EQ(run.parameters(), loop.parameters());
}

// The copy ahead is ordered before the step by an event, not by the host: without the step's
// wait for its inputs' events, the simulated device finds the step reading the rows before the
// copy's stream is known to be done. (A step that copied its batch itself would not fail so:
// its copies from the host are waited for where they are made.)
TEST(TrainingRun, TheStepWaitsForTheStreamOfTheCopyAhead) {
  const std::vector<Device> sims = {Device::sim(0)};
  std::string error;
  {
    testing::DropWait drop("handover");
    RunParts run(0.1, sims);
    error = testing::error_of(
        [&] { TrainingRun(run.trainer, run.sgd, run.data, run.state, {.steps = 3}).run(); });
  }
  EXPECT_THAT(error, ::testing::HasSubstr("reads memory that a copy of 240 bytes from cpu"));
  EXPECT_THAT(error, ::testing::HasSubstr("the two race on a GPU"));
  RunParts run(0.1, sims);
  EXPECT_EQ(testing::error_of([&] {
              TrainingRun(run.trainer, run.sgd, run.data, run.state, {.steps = 3}).run();
            }),
            "no error");
}

TEST(TrainingRun, ARunResumedAtAStepEndsWhereTheWholeRunEnds) {
  RunParts whole, halves;
  TrainingRun(whole.trainer, whole.sgd, whole.data, whole.state, {.steps = 7, .seed = 3}).run();
  TrainingRun(halves.trainer, halves.sgd, halves.data, halves.state, {.steps = 3, .seed = 3}).run();
  TrainingRun(halves.trainer, halves.sgd, halves.data, halves.state, {.steps = 7, .seed = 3})
      .run(3);
  EXPECT_EQ(whole.parameters(), halves.parameters());
}

TEST(TrainingRun, SavesTheModelThenTheCheckpointEveryNStepsAndAtTheEnd) {
  auto saves_of = [](int64_t steps, int64_t every) {
    RunParts s;
    RecordingWriter writer;
    TrainingRun run(s.trainer, s.sgd, s.data, s.state, {.steps = steps, .checkpoint_every = every});
    run.set_writer(&writer);
    run.run();
    return writer.saves;
  };
  EXPECT_EQ(saves_of(7, 3), (std::vector<std::string>{"model@3", "checkpoint@3", "model@6",
                                                      "checkpoint@6", "model@7", "checkpoint@7"}));
  // The last step's save is not made twice.
  EXPECT_EQ(saves_of(6, 3),
            (std::vector<std::string>{"model@3", "checkpoint@3", "model@6", "checkpoint@6"}));
  EXPECT_EQ(saves_of(4, 0), (std::vector<std::string>{"model@4"}));
}

TEST(TrainingRun, CallbacksSeeEveryStepAndEachEpochsEnd) {
  RunParts s;
  std::vector<int64_t> steps_seen;
  std::vector<EpochRecord> epochs;
  TrainingRunOptions options{
      .steps = 7,
      .on_step = [&](int64_t done, const StepRecord&) { steps_seen.push_back(done); },
      .on_epoch = [&](const EpochRecord& e) { epochs.push_back(e); }};
  const std::vector<StepRecord> records =
      TrainingRun(s.trainer, s.sgd, s.data, s.state, std::move(options)).run();
  EXPECT_EQ(steps_seen, (std::vector<int64_t>{1, 2, 3, 4, 5, 6, 7}));
  // 5 batches an epoch: epoch 0 ends at step 5; the run stops within epoch 1, after 2 steps.
  ASSERT_EQ(epochs.size(), 2u);
  EXPECT_EQ(epochs[0].epoch, 0);
  EXPECT_EQ(epochs[1].epoch, 1);
  double first = 0, second = 0;
  for (size_t i = 0; i < 5; ++i) first += records[i].loss * 5;
  for (size_t i = 5; i < 7; ++i) second += records[i].loss * 5;
  EXPECT_DOUBLE_EQ(epochs[0].mean_loss, first / 25);
  EXPECT_DOUBLE_EQ(epochs[1].mean_loss, second / 10);
  EXPECT_FALSE(epochs[0].validation.has_value());
}

TEST(TrainingRun, ValidatesAtEachEpochsEnd) {
  RunParts s;
  LossSpec loss;
  loss.kind = LossKind::CrossEntropy;
  Validation validation(*s.model, loss,
                        TrainingData({"x"}, {read_npy(training_file("mlp_sgd.x.npy"))},
                                     read_npy(training_file("mlp_sgd.target.npy")), {.batch = 25}));
  std::vector<EpochRecord> epochs;
  TrainingRun run(s.trainer, s.sgd, s.data, s.state,
                  {.steps = 10, .on_epoch = [&](const EpochRecord& e) { epochs.push_back(e); }});
  run.set_validation(&validation);
  run.run();
  ASSERT_EQ(epochs.size(), 2u);
  for (const EpochRecord& e : epochs) ASSERT_TRUE(e.validation.has_value());
  // Trained on the rows it validates on: the second epoch's loss is lower.
  EXPECT_LT(epochs[1].validation->loss, epochs[0].validation->loss);
}

TEST(TrainingRun, ADivergingRunStopsAtTheStepAndSavesNothingOfIt) {
  RunParts s(std::numeric_limits<double>::infinity());
  RecordingWriter writer;
  TrainingRun run(s.trainer, s.sgd, s.data, s.state, {.steps = 4, .checkpoint_every = 1});
  run.set_writer(&writer);
  EXPECT_EQ(testing::error_of([&] { run.run(); }),
            "step 1: parameter '" + s.trainer.parameter_names()[0] +
                "' is not finite after the update; training diverged (try a smaller --lr)");
  EXPECT_TRUE(writer.saves.empty());
}

}  // namespace
}  // namespace dprun
