#include "engine/training/training_run.h"

#include <chrono>
#include <cmath>
#include <optional>

#include "engine/allocator.h"
#include "engine/backend.h"
#include "engine/distributed/rank_failure.h"
#include "engine/execution_context.h"
#include "engine/random_seed.h"
#include "engine/training/ahead_worker.h"

namespace dprun {

/// The batches of one optimizer step: the next `accumulate` of the epochs' sequence (a
/// distributed rank's shard of each), the step's rows over all ranks, and the epoch that ends
/// in the step when one of its batches is that epoch's last.
struct TrainingRun::Step {
  std::vector<Batch> batches;
  /// The random ops' seed of each batch's forward pass (Trainer::set_random_seed), derived
  /// from the run's seed, the rank and the batch's index in the run: a rerun, or a resumed
  /// run, draws the same Dropout masks.
  std::vector<uint64_t> seeds;
  int64_t rows = 0;
  std::optional<int64_t> epoch_end;
};

TrainingRun::TrainingRun(Trainer& trainer, Optimizer& optimizer, TrainingData& data,
                         const CheckpointedRun& state, TrainingRunOptions options,
                         DistributedDataParallel* ddp)
    : trainer_(trainer),
      optimizer_(optimizer),
      data_(data),
      state_(state),
      options_(std::move(options)),
      ddp_(ddp),
      base_lr_(optimizer.lr()) {
  DPRUN_CHECK(options_.accumulate >= 1, "a training run needs accumulate >= 1, got ",
              options_.accumulate);
  DPRUN_CHECK(options_.checkpoint_every >= 0, "a training run needs checkpoint_every >= 0, got ",
              options_.checkpoint_every);
}

TrainingRun::Step TrainingRun::batches_of(int64_t step) const {
  const int rank = ddp_ ? ddp_->group().rank() : 0, ranks = ddp_ ? ddp_->group().size() : 1;
  const uint64_t rank_seed = derive_seed(options_.seed, static_cast<uint64_t>(rank));
  const int64_t per_epoch = data_.batches_per_epoch();
  Step s;
  for (int64_t j = 0; j < options_.accumulate; ++j) {
    const int64_t m = step * options_.accumulate + j, epoch = m / per_epoch, k = m % per_epoch;
    const bool shard = ddp_ && !options_.rank_local_data;
    s.batches.push_back(shard ? data_.batch(epoch, k, rank, ranks) : data_.batch(epoch, k));
    if (ddp_ && options_.rank_local_data) {
      int64_t global_rows = 0;
      for (int64_t rows : all_gather_values(ddp_->group(), s.batches.back().rows))
        global_rows += rows;
      s.batches.back().global_rows = global_rows;
    }
    s.rows += s.batches.back().global_rows;
    s.seeds.push_back(derive_seed(rank_seed, static_cast<uint64_t>(m)));
    if (k + 1 == per_epoch) s.epoch_end = epoch;
  }
  return s;
}

namespace {

/// Where a step's batches are copied ahead of the step: the trainer's first device when it is
/// an accelerator (the step's scatter splits them from there, as DataParallel scatters from
/// device_ids[0]); nullopt for a CPU device, which reads host memory where it is.
std::optional<Device> copy_ahead_device(const std::vector<Device>& devices) {
  if (devices.empty() || devices[0].type == DeviceType::CPU) return std::nullopt;
  return devices[0];
}

}  // namespace

TrainingRun::Step TrainingRun::batches_ahead(int64_t step) const {
  Step s = batches_of(step);
  const std::optional<Device> device = copy_ahead_device(trainer_.devices());
  if (!device) return s;
  // The copies go on this thread's own stream, and each copy hands its destination on with an
  // event of that stream (engine/stream_order.h), which the step's stream waits for.
  const std::unique_ptr<ExecutionContext> context =
      backend_for(*device).create_execution_context(*device, {});
  for (Batch& b : s.batches) {
    for (Tensor& t : b.inputs) t = t.to_unless_string(*device);
    if (b.target.defined()) b.target = b.target.to(*device);
  }
  return s;
}

/// Forward and backward over the step's batches, each weighted by its share of the step's
/// rows and their gradients summed, then the update Trainer::step makes (unscale, clip, step).
/// A distributed rank sums its batches' gradients itself and over the ranks once, with the last
/// batch (PyTorch's no_sync). Returns the step's loss.
///
/// With a loss that leaves out ignored targets, a batch weighs its share of the step's counted
/// targets (over every rank) instead of its rows, so that the step is their mean, as one batch
/// of all the rows: all the step's batches are in memory, so they are counted before the first
/// forward pass (a distributed rank exchanges one count). With no target ignored the weights
/// are the row shares' very doubles.
double TrainingRun::accumulated_step(const Step& step) {
  std::optional<int64_t> counted;  // the step's counted targets; nullopt: weigh by rows
  std::vector<int64_t> batch_counted;
  if (ddp_) {
    std::vector<Tensor> targets;
    for (const Batch& b : step.batches) targets.push_back(b.target);
    counted = ddp_->count_targets(targets);
  } else {
    for (const Batch& b : step.batches)
      if (std::optional<int64_t> c = trainer_.counted_targets(b.target)) {
        batch_counted.push_back(*c);
        counted = counted.value_or(0) + *c;
      }
  }
  double loss = 0;
  for (size_t j = 0; j < step.batches.size(); ++j) {
    const Batch& b = step.batches[j];
    trainer_.set_random_seed(step.seeds[j]);
    if (!ddp_) {
      const double weight =
          !counted        ? static_cast<double>(b.rows) / static_cast<double>(step.rows)
          : *counted == 0 ? 0.0  // nothing counted: the loss 0 and no gradient
                          : static_cast<double>(batch_counted[j]) / static_cast<double>(*counted);
      loss += trainer_.forward_backward(b.inputs, b.target, weight, j > 0);
      continue;
    }
    const bool last = j + 1 == step.batches.size();
    const double batch_loss =
        ddp_->forward_backward(b.inputs, b.target, b.rows, step.rows, last, counted);
    if (last) loss = batch_loss;  // the step's global loss
  }
  if (ddp_)
    trainer_.update(optimizer_, ddp_->gradients());
  else
    trainer_.update(optimizer_, trainer_.gradients(), trainer_.devices());
  trainer_.model().mark_parameters_changed();
  return loss;
}

StepRecord TrainingRun::run_step(const Step& step) {
  StepRecord record{.rows = step.rows, .lr = optimizer_.lr()};
  const GradScaler* scaler = trainer_.grad_scaler();
  const int64_t skipped_before = scaler ? scaler->skipped_steps() : 0;
  if (scaler) record.loss_scale = scaler->scale();
  const auto start = std::chrono::steady_clock::now();
  const Batch& b = step.batches[0];
  trainer_.set_random_seed(step.seeds[0]);
  record.loss = step.batches.size() > 1 ? accumulated_step(step)
                : ddp_ ? ddp_->step(b.inputs, b.target, b.rows, b.global_rows, optimizer_)
                       : trainer_.step(b.inputs, b.target, optimizer_);
  record.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  record.skipped = scaler && scaler->skipped_steps() > skipped_before;
  record.grad_norm = trainer_.last_grad_norm();
  return record;
}

// Every rank holds the same global loss and, after the update, the same parameters: each
// stops at the same step, and the collective error lets the others know.
void TrainingRun::check_finite(int64_t step, double loss) const {
  std::string message;
  if (!std::isfinite(loss)) {
    message = detail::concat("step ", step + 1, ": the loss is ", loss,
                             "; training diverged (try a smaller --lr)");
  } else if (const std::optional<size_t> i = optimizer_.non_finite_parameter()) {
    const std::vector<std::string>& names = trainer_.parameter_names();
    const std::string name = *i < names.size() ? names[*i] : detail::concat("#", *i);
    message = detail::concat("step ", step + 1, ": parameter '", name,
                             "' is not finite after the update; training diverged (try a "
                             "smaller --lr)");
  } else {
    return;
  }
  if (ddp_) throw CollectiveError(message);
  fail(message);
}

void TrainingRun::save(int64_t steps_done) {
  if (!writer_) return;
  writer_->save_model(trainer_.model(), steps_done);
  if (options_.checkpoint_every) writer_->save_checkpoint(state_, steps_done);
}

std::vector<StepRecord> TrainingRun::run(int64_t first_step) {
  std::vector<StepRecord> records;
  const int64_t steps = options_.steps, every = options_.checkpoint_every;
  int64_t epoch_samples = 0;
  double epoch_seconds = 0, epoch_loss = 0;
  // The next step's batches are gathered on a thread of its own while a step runs; they depend
  // on the step's number only, so the order in which they are made changes nothing. A run of
  // one step (each of dprun.Trainer's) has nothing to overlap: its batches are gathered here,
  // as are those of ranks that pass their own (rank_local_data: gathering them is a collective,
  // which must not overlap the step's).
  std::optional<AheadWorker<Step>> ahead;
  if (steps - first_step > 1 && !(ddp_ && options_.rank_local_data)) {
    ahead.emplace([this](int64_t k) { return batches_ahead(k); });
    ahead->request(first_step);
  }
  for (int64_t step = first_step; step < steps; ++step) {
    const auto wait_start = std::chrono::steady_clock::now();
    const Step batches = ahead ? ahead->take() : batches_of(step);
    const double waited =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - wait_start).count();
    if (ahead && step + 1 < steps) ahead->request(step + 1);
    optimizer_.set_lr(options_.lr_schedule.lr(base_lr_, step, steps));
    if (!options_.group_lrs.empty()) {
      std::vector<std::optional<double>> now(options_.group_lrs.size());
      for (size_t i = 0; i < now.size(); ++i)  // each scheduled from its own base, as PyTorch's
        if (const auto& lr = options_.group_lrs[i])
          now[i] = options_.lr_schedule.lr(*lr, step, steps);
      optimizer_.set_parameter_lrs(std::move(now));
    }
    records.push_back(run_step(batches));
    records.back().data_wait_seconds = waited;
    const StepRecord& record = records.back();
    check_finite(step, record.loss);
    epoch_seconds += record.seconds + waited;
    epoch_samples += batches.rows;
    epoch_loss += record.loss * static_cast<double>(batches.rows);
    if (options_.on_step) options_.on_step(step + 1, record);
    if (every && (step + 1) % every == 0) save(step + 1);
    std::optional<int64_t> epoch = batches.epoch_end;
    if (step + 1 == steps && !epoch)  // a run that ends within an epoch
      epoch = (step * options_.accumulate + options_.accumulate - 1) / data_.batches_per_epoch();
    if (epoch) {
      EpochRecord done{.epoch = *epoch,
                       .mean_loss = epoch_loss / static_cast<double>(epoch_samples),
                       .samples_per_s = static_cast<double>(epoch_samples) / epoch_seconds};
      if (validation_) done.validation = validation_->run();
      if (options_.on_epoch) options_.on_epoch(done);
      epoch_samples = 0;
      epoch_seconds = epoch_loss = 0;
    }
  }
  if (ddp_) ddp_->check_parameters_in_sync();  // before anything is saved from them
  if (options_.release_memory_at_end)
    for (const Device& d : trainer_.devices()) backend_for(d).allocator(d)->release_cached();
  // Unless the last step's checkpoint already saved both (written again, a kill could leave a
  // temporary file beside a finished run's).
  if (!(every && steps % every == 0)) save(steps);
  return records;
}

}  // namespace dprun
