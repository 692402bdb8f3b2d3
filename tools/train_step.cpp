#include "tools/train_step.h"

#include <chrono>
#include <optional>

#include "engine/random_seed.h"

namespace dprun::cli {

StepBatches step_batches(TrainingData& data, int64_t step, int64_t accumulate,
                         const std::optional<DistributedRun>& dist, uint64_t seed) {
  const uint64_t rank_seed = derive_seed(seed, dist ? static_cast<uint64_t>(dist->rank()) : 0);
  const int64_t per_epoch = data.batches_per_epoch();
  StepBatches s;
  for (int64_t j = 0; j < accumulate; ++j) {
    const int64_t m = step * accumulate + j, epoch = m / per_epoch, k = m % per_epoch;
    s.batches.push_back(dist ? data.batch(epoch, k, dist->rank(), dist->size())
                             : data.batch(epoch, k));
    s.rows += s.batches.back().global_rows;
    s.seeds.push_back(derive_seed(rank_seed, static_cast<uint64_t>(m)));
    if (k + 1 == per_epoch) s.epoch_end = epoch;
  }
  return s;
}

namespace {

/// Forward and backward over the step's batches, each weighted by its share of the step's
/// rows and their gradients summed (--accumulate), then the update Trainer::step makes
/// (unscale, clip, step). A distributed rank sums its batches' gradients itself and over the
/// ranks once, with the last batch (PyTorch's no_sync). Returns the step's loss.
///
/// With a loss that leaves out ignored targets, a batch weighs its share of the step's counted
/// targets (over every rank) instead of its rows, so that the step is their mean, as one batch
/// of all the rows: all the step's batches are in memory, so they are counted before the first
/// forward pass (a distributed rank exchanges one count). With no target ignored the weights
/// are the row shares' very doubles.
double accumulated_step(const StepBatches& step, DistributedDataParallel* ddp, Trainer& trainer,
                        Optimizer& optimizer, const std::vector<Device>& devices) {
  std::optional<int64_t> counted;  // the step's counted targets; nullopt: weigh by rows
  std::vector<int64_t> batch_counted;
  if (ddp) {
    std::vector<Tensor> targets;
    for (const Batch& b : step.batches) targets.push_back(b.target);
    counted = ddp->count_targets(targets);
  } else {
    for (const Batch& b : step.batches)
      if (std::optional<int64_t> c = trainer.counted_targets(b.target)) {
        batch_counted.push_back(*c);
        counted = counted.value_or(0) + *c;
      }
  }
  double loss = 0;
  for (size_t j = 0; j < step.batches.size(); ++j) {
    const Batch& b = step.batches[j];
    trainer.set_random_seed(step.seeds[j]);
    if (!ddp) {
      const double weight =
          !counted        ? static_cast<double>(b.rows) / static_cast<double>(step.rows)
          : *counted == 0 ? 0.0  // nothing counted: the loss 0 and no gradient
                          : static_cast<double>(batch_counted[j]) / static_cast<double>(*counted);
      loss += trainer.forward_backward(b.inputs, b.target, weight, j > 0);
      continue;
    }
    const bool last = j + 1 == step.batches.size();
    const double batch_loss =
        ddp->forward_backward(b.inputs, b.target, b.rows, step.rows, last, counted);
    if (last) loss = batch_loss;  // the step's global loss
  }
  if (ddp) {
    trainer.update(optimizer, ddp->gradients());
  } else {
    trainer.update(optimizer, trainer.gradients(), devices);
  }
  trainer.model().mark_parameters_changed();
  return loss;
}

}  // namespace

StepRecord run_step(const StepBatches& step, DistributedDataParallel* ddp, Trainer& trainer,
                    Optimizer& optimizer, const std::vector<Device>& devices) {
  StepRecord record{.rows = step.rows, .lr = optimizer.lr()};
  const GradScaler* scaler = trainer.grad_scaler();
  const int64_t skipped_before = scaler ? scaler->skipped_steps() : 0;
  if (scaler) record.loss_scale = scaler->scale();
  const auto start = std::chrono::steady_clock::now();
  const Batch& b = step.batches[0];
  trainer.set_random_seed(step.seeds[0]);
  record.loss = step.batches.size() > 1 ? accumulated_step(step, ddp, trainer, optimizer, devices)
                : ddp ? ddp->step(b.inputs, b.target, b.rows, b.global_rows, optimizer)
                      : trainer.step(b.inputs, b.target, optimizer);
  record.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  record.skipped = scaler && scaler->skipped_steps() > skipped_before;
  record.grad_norm = trainer.last_grad_norm();
  return record;
}

}  // namespace dprun::cli
