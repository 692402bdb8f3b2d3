#pragma once
// The training behind dprun.Trainer: a model, its Trainer and optimizer, and one
// dprun::TrainingRun per optimizer step over the batches the caller hands in, so that each step
// is the one `dprun train` makes on the same batches (the same weighting of accumulated
// batches, Dropout seeds, lr groups, finiteness checks), bit for bit. No Python here.
#include <cstdint>
#include <exception>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/training/checkpoint_state.h"
#include "engine/training/data_checks.h"
#include "engine/training/distributed_data_parallel.h"
#include "engine/training/optimizer.h"
#include "engine/training/trainer.h"
#include "engine/training/validation.h"
#include "tools/python/options.h"

namespace dprun::python {

class TrainingSession {
 public:
  /// Compiles `graph` (the training form, read from `source`) on the first device and builds
  /// the Trainer and optimizer `settings` describe, as `dprun train` does from its flags. With
  /// `checkpoint` (read from `source`), restores its state as --resume does: a setting that
  /// differs from the checkpoint's is refused with restore_training_state's message.
  ///
  /// With settings.job (distributed=True), this process is one rank of a job that every rank
  /// builds alike: the model is trained by a DistributedDataParallel over the job's group. An
  /// error on one rank raises on every rank (the ranks agree on it), as does a model or a
  /// setting that differs between the ranks ("ranks disagree on ...").
  TrainingSession(std::shared_ptr<const Graph> graph, std::string source, TrainSettings settings,
                  const Checkpoint* checkpoint = nullptr);
  ~TrainingSession();

  /// One batch: inputs in input_names() order, `target` undefined when the loss takes none.
  /// Without accumulate, one optimizer step on it and its loss. With accumulate N, the batch is
  /// kept (copied) until the N-th, which runs the step over all N (each weighted by its share of
  /// the step's rows, or of its counted targets) and returns the step's loss; the calls before
  /// return nullopt. Throws Error as `dprun train` does for bad data (a NaN, a class label
  /// outside the model's classes, rows that differ) and for a step whose loss or parameters are
  /// not finite ("step N: the loss is nan; training diverged (try a smaller --lr)").
  ///
  /// Distributed, each rank passes its own batch (as under PyTorch's DistributedSampler) and
  /// every rank makes the same calls: the step is one step over the ranks' batches together,
  /// its gradient their rows' mean, its loss the same on every rank. A bad batch on one rank
  /// raises on every rank, naming it ("rank 1: input 'x' ...").
  /// `input_error`, when given, is the error this rank met reading its batch: distributed, the
  /// ranks agree on it as on a bad batch; otherwise it is thrown.
  std::optional<double> step(std::vector<Tensor> inputs, Tensor target,
                             std::exception_ptr input_error = nullptr);
  /// The inference form's loss (and accuracy for class losses) on one batch, as --val-input
  /// computes it.
  ValidationResult evaluate(std::vector<Tensor> inputs, Tensor target);
  /// The inference form of the model, written as --save writes it (distributed: by rank 0
  /// only; the other ranks write nothing).
  void save(const std::string& path);
  /// The checkpoint of the steps done, written as --checkpoint-every writes it (distributed: by
  /// rank 0 only).
  void save_checkpoint(const std::string& path);
  /// This process's rank and the job's ranks: 0 and 1 without distributed=True.
  int rank() const { return settings_.job ? settings_.job->rank() : 0; }
  int world_size() const { return settings_.job ? settings_.job->size() : 1; }

  double lr() const { return optimizer_->lr(); }
  void set_lr(double lr);
  int64_t steps_done() const { return steps_done_; }
  int64_t pending_batches() const { return static_cast<int64_t>(pending_.size()); }
  const Trainer& trainer() const { return *trainer_; }
  Model& model() { return *model_; }
  const TrainSettings& settings() const { return settings_; }

 private:
  struct PendingBatch {
    std::vector<Tensor> inputs;
    Tensor target;
  };
  // The model, its Trainer (or DistributedDataParallel) and optimizer, and the checkpoint's
  // state when there is one.
  void set_up(std::shared_ptr<const Graph> graph, const Checkpoint* checkpoint);
  void check_batch(const std::vector<Tensor>& inputs, const Tensor& target) const;
  // The inputs with settings_.transforms applied (layout and normalization).
  std::vector<Tensor> transformed(std::vector<Tensor> inputs) const;
  std::vector<RunSetting> run_settings_now() const;
  /// The run's state as a checkpoint holds it (to write or to restore), with the settings now.
  CheckpointedRun checkpointed_run() const;
  double run_step(std::vector<PendingBatch> batches);

  TrainSettings settings_;
  std::string source_;
  std::shared_ptr<Model> model_;
  std::unique_ptr<Trainer> single_;               // without distributed=True
  std::unique_ptr<DistributedDataParallel> ddp_;  // with it
  Trainer* trainer_ = nullptr;                    // single_'s or ddp_'s
  std::unique_ptr<Optimizer> optimizer_;
  std::vector<std::optional<double>> group_lrs_;
  std::optional<ClassLabels> labels_;  // the class labels the loss accepts, if it has any
  int64_t steps_done_ = 0;
  int64_t batch_ = 0;  // the rows of the first batch of the first step: the run's --batch
  std::vector<PendingBatch> pending_;
};

}  // namespace dprun::python
