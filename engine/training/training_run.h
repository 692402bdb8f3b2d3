#pragma once
// TrainingRun: a training run as `dprun train` makes it, for any caller (the command line, a
// C++ application, the Python module): the optimizer steps over the data's epochs, each of
// `accumulate` batches whose gradients are summed before one update, the scheduled learning
// rates, validation at each epoch's end, the model and checkpoint saved every
// `checkpoint_every` steps and at the end (the model first, then the checkpoint: a kill between
// the two leaves the checkpoint of the step before, so a checkpoint is never ahead of the model
// beside it), and a stop with one line at the first step whose loss or updated parameters are
// not finite.
//
//   auto model = std::make_shared<Model>(load_model("mlp.onnx"));
//   Trainer trainer(model, options);                    // loss, devices, precision
//   Sgd sgd(trainer.parameters(), {.lr = 0.1});
//   TrainingData data = read_training_data(files);      // loader/training_data_files.h
//   const CheckpointedRun state{.model = *model, .parameter_names = trainer.parameter_names(),
//                               .optimizer = sgd};
//   TrainingRunFiles files("trained.onnx");            // loader/training_run_files.h
//   TrainingRun run(trainer, sgd, data, state, {.steps = 100, .checkpoint_every = 10});
//   run.set_writer(&files);
//   std::vector<StepRecord> steps = run.run();
//
// The caller makes the parts (the Trainer or a DistributedDataParallel rank, the optimizer, the
// data), restores a checkpoint's state into them to resume, and shows progress from the
// callbacks; TrainingRun decides what each step does and when files are written. The batches of
// the next step are gathered on a background thread while a step runs: only that thread calls
// the data's batch() during run(), one step's batches at a time, so the data needs
// 2 * accumulate batches in use (TrainingDataOptions::batches_in_use) with pinned buffers.
// When the trainer's first device is an accelerator, that thread also copies the batches there,
// on a stream of its own, and the step's scatter splits them from there (PyTorch's
// pin_memory and non_blocking copy ahead of DataParallel): the step's stream waits for the
// copy's event, never the host.
#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

#include "engine/training/checkpoint_state.h"
#include "engine/training/distributed_data_parallel.h"
#include "engine/training/lr_schedule.h"
#include "engine/training/optimizer.h"
#include "engine/training/trainer.h"
#include "engine/training/training_data.h"
#include "engine/training/validation.h"

namespace dprun {

/// One optimizer step as the run made it.
struct StepRecord {
  double loss = 0;
  int64_t rows = 0;    // over every rank
  double seconds = 0;  // wall time of the step: forward, backward and update
  /// How long the step waited for its batches, which a background thread gathers (and
  /// transforms) while the step before runs: 0 when they were ready.
  double data_wait_seconds = 0;
  double lr = 0;  // the learning rate of the step's update
  /// float16 training: the loss scale the step ran with, and whether its update was skipped
  /// because a gradient overflowed.
  std::optional<double> loss_scale;
  bool skipped = false;
  /// With a gradient clipping norm: the gradients' total norm before clipping.
  std::optional<double> grad_norm;
};

/// The end of an epoch (or of a run that stops within one).
struct EpochRecord {
  int64_t epoch = 0;                           // from 0
  double mean_loss = 0;                        // the steps' losses weighted by their rows
  double samples_per_s = 0;                    // over the epoch's steps in this run
  std::optional<ValidationResult> validation;  // with a validation set
};

/// Where a run's files go; loader/training_run_files.h writes them as ONNX files.
class TrainingRunWriter {
 public:
  virtual ~TrainingRunWriter() = default;
  /// The model to serve, after `steps_done` steps.
  virtual void save_model(const Model& model, int64_t steps_done) = 0;
  /// The checkpoint to resume from, after `steps_done` steps.
  virtual void save_checkpoint(const CheckpointedRun& run, int64_t steps_done) = 0;
};

struct TrainingRunOptions {
  /// Optimizer steps in the whole run (a resumed run counts the steps before it too).
  int64_t steps = 0;
  /// Batches per optimizer step: their gradients, each weighted by its share of the step's
  /// rows, are summed before one update.
  int64_t accumulate = 1;
  /// The run's seed: each batch's random ops (Dropout) draw from it, the rank and the batch's
  /// index in the run, so a rerun or a resumed run draws the same masks.
  uint64_t seed = 0;
  /// The learning rate of each step, from the optimizer's lr at the start and from each
  /// parameter group's (`group_lrs`, by parameter; empty when there are none).
  LrSchedule lr_schedule;
  std::vector<std::optional<double>> group_lrs;
  /// With `ddp`: `data` holds this rank's own batches (each rank passes its own, as under
  /// PyTorch's DistributedSampler) rather than the global batches whose shard the rank takes.
  /// The global batch k is then every rank's batch k, its rows summed over the ranks (one
  /// exchange of a count per batch).
  bool rank_local_data = false;
  /// Save the model and a checkpoint every this many steps (0: the model at the end only).
  int64_t checkpoint_every = 0;
  /// Before the save at the end, give the devices' cached memory (the steps' activations and
  /// gradients; Allocator::release_cached) back to the system, so that writing the model reuses it
  /// instead of adding to the run's peak: for a run that ends the training (the CLI's), not one
  /// step of several (a dprun.Trainer's, whose next step would fault its memory in anew).
  bool release_memory_at_end = false;
  /// After each step (steps done so far, the step).
  std::function<void(int64_t, const StepRecord&)> on_step;
  /// At each epoch's end, and at the end of a run that stops within an epoch.
  std::function<void(const EpochRecord&)> on_epoch;
};

class TrainingRun {
 public:
  /// A run of `trainer` with `optimizer` (made over trainer's parameters) on `data`. `state`
  /// is what a checkpoint holds (restore it before run() to resume). `ddp`, when given, is this
  /// process's rank of a distributed run whose Trainer is `trainer`: each step takes the rank's
  /// shard of every batch and sums the gradients over the ranks.
  TrainingRun(Trainer& trainer, Optimizer& optimizer, TrainingData& data,
              const CheckpointedRun& state, TrainingRunOptions options,
              DistributedDataParallel* ddp = nullptr);

  /// Where the model and checkpoints go; none (the default) writes nothing, as on the ranks
  /// of a distributed run other than 0.
  void set_writer(TrainingRunWriter* writer) { writer_ = writer; }
  /// Validated at each epoch's end; none by default.
  void set_validation(Validation* validation) { validation_ = validation; }

  /// Runs steps `first_step` .. options.steps - 1 and returns their records, after saving the
  /// model (and a checkpoint with checkpoint_every) at the end; a distributed rank first checks
  /// that its parameters are those of every other rank (check_parameters_in_sync). Throws Error at
  /// a step whose loss or updated parameters are not finite (CollectiveError on a distributed rank,
  /// so the other ranks stop too), nothing saved for that step.
  std::vector<StepRecord> run(int64_t first_step = 0);

 private:
  struct Step;
  Step batches_of(int64_t step) const;
  /// batches_of on the background thread: on an accelerator, copied to it there.
  Step batches_ahead(int64_t step) const;
  StepRecord run_step(const Step& step);
  double accumulated_step(const Step& step);
  void check_finite(int64_t step, double loss) const;
  void save(int64_t steps_done);

  Trainer& trainer_;
  Optimizer& optimizer_;
  TrainingData& data_;
  const CheckpointedRun& state_;
  TrainingRunOptions options_;
  DistributedDataParallel* ddp_;
  double base_lr_;
  TrainingRunWriter* writer_ = nullptr;
  Validation* validation_ = nullptr;
};

}  // namespace dprun
