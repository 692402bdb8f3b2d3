#include "tools/python/training_session.h"

#include <algorithm>
#include <cstdint>
#include <exception>
#include <utility>

#include "engine/distributed/rank_agreement.h"
#include "engine/distributed/rank_failure.h"
#include "engine/executor.h"
#include "engine/training/sample_transform.h"
#include "engine/training/training_data.h"
#include "engine/training/training_run.h"
#include "loader/checkpoint_file.h"
#include "loader/training_run_files.h"
#include "tools/python/errors.h"

namespace dprun::python {

namespace {

/// Whether no element of `t` (host memory) has every bit of `exponent` set, as only infinities
/// and NaNs have: a pass as fast as the memory is read, in blocks so that it stops soon after
/// the first such element.
template <class Bits>
bool exponents_finite(const Tensor& t, Bits exponent) {
  const Bits* v = static_cast<const Bits*>(t.raw_data());
  constexpr int64_t kBlock = 4096;
  for (int64_t begin = 0, n = t.numel(); begin < n; begin += kBlock) {
    Bits found = 0;  // a mask, not a bool, so that the loop is vectorized
    for (int64_t i = begin, end = std::min(n, begin + kBlock); i < end; ++i)
      found |= (v[i] & exponent) == exponent ? ~Bits(0) : Bits(0);
    if (found) return false;
  }
  return true;
}

/// check_finite_rows (a batch holds no NaN nor infinity), whose row-by-row scan, a few
/// nanoseconds an element (about 1 ms of a 6 ms step of models/cnn.onnx at batch 64), runs only
/// to name the row once a first pass over float32 or float64 has found such a value.
void check_finite(const Tensor& t, int64_t dim, const std::string& source) {
  const DType dtype = t.dtype();
  const bool finite = dtype == DType::Float32   ? exponents_finite<uint32_t>(t, 0x7f800000u)
                      : dtype == DType::Float64 ? exponents_finite<uint64_t>(t, 0x7ff0000000000000u)
                                                : !is_floating(dtype);
  if (!finite) check_finite_rows(t, dim, source);
}

/// The --batch a checkpoint was written with (0 when it does not say).
int64_t saved_batch(const Checkpoint& checkpoint) {
  auto it = checkpoint.state.find("run.batch");
  if (it == checkpoint.state.end() || it->second.dtype() != DType::UInt8) return 0;
  const auto* bytes = it->second.data<uint8_t>();
  try {
    return std::stoll(std::string(bytes, bytes + it->second.numel()));
  } catch (const std::exception&) {
    return 0;
  }
}

}  // namespace

TrainingSession::TrainingSession(std::shared_ptr<const Graph> graph, std::string source,
                                 TrainSettings settings, const Checkpoint* checkpoint)
    : settings_(std::move(settings)), source_(std::move(source)) {
  DistributedJob* job = settings_.job.get();
  std::exception_ptr setup_error;  // distributed: agreed on by every rank before it is raised
  try {
    set_up(std::move(graph), checkpoint);
  } catch (const Error&) {
    if (!job) throw;
    setup_error = std::current_exception();
  }
  if (!job) return;
  throw_if_any_rank_failed(*job->group, setup_error);
  std::vector<RankFact> facts = model_facts(*model_);
  for (const RunSetting& setting : run_settings_now())
    facts.push_back({spell_option(setting.option, OptionSpelling::Keyword), "", setting.value});
  job->group->set_stage("at start-up");
  check_ranks_agree(*job->group, facts);
  job->group->set_stage("");
}

void TrainingSession::set_up(std::shared_ptr<const Graph> graph, const Checkpoint* checkpoint) {
  const Device first = settings_.trainer.parallel.device_ids.front();
  try {
    model_ = std::make_shared<Model>(std::move(graph), first, settings_.compile);
  } catch (const Error& e) {
    raise(source_ + ": " + e.what());
  }
  if (const DistributedJob* job = settings_.job.get()) {
    ddp_ = std::make_unique<DistributedDataParallel>(model_, settings_.trainer, job->group,
                                                     job->options);
    trainer_ = &ddp_->trainer();
  } else {
    single_ = std::make_unique<Trainer>(model_, settings_.trainer);
    trainer_ = single_.get();
  }
  optimizer_ = make_optimizer(settings_.optimizer, *trainer_, OptionSpelling::Keyword);
  group_lrs_ = parameter_group_lrs(settings_.optimizer, *trainer_, OptionSpelling::Keyword);
  labels_ = class_labels(*model_, settings_.trainer.training.loss);
  if (!checkpoint) return;
  batch_ = saved_batch(*checkpoint);
  steps_done_ = restore_training_state(*checkpoint, source_, checkpointed_run());
}

TrainingSession::~TrainingSession() = default;

std::vector<RunSetting> TrainingSession::run_settings_now() const {
  std::vector<RunSetting> settings = run_settings(settings_.trainer, *model_, *trainer_,
                                                  *optimizer_, batch_, settings_.accumulate, false);
  for (RunSetting& s : transform_settings(settings_.transforms)) settings.push_back(std::move(s));
  return settings;
}

CheckpointedRun TrainingSession::checkpointed_run() const {
  return CheckpointedRun{.model = *model_,
                         .parameter_names = trainer_->parameter_names(),
                         .optimizer = *optimizer_,
                         .scaler = trainer_->grad_scaler(),
                         .seed = settings_.seed,
                         .settings = run_settings_now()};
}

void TrainingSession::set_lr(double lr) {
  if (!(std::isfinite(lr) && lr >= 0)) raise("lr: " + detail::concat(lr) + " is not a number >= 0");
  optimizer_->set_lr(lr);
}

void TrainingSession::check_batch(const std::vector<Tensor>& inputs, const Tensor& target) const {
  const std::vector<const ValueInfo*> declared = model_->graph().required_inputs();
  if (inputs.size() != declared.size())
    raise("the model takes " + std::to_string(declared.size()) + " inputs but got " +
          std::to_string(inputs.size()));
  for (size_t i = 0; i < inputs.size(); ++i) {
    check_input(*declared[i], inputs[i]);
    check_finite(inputs[i], settings_.trainer.parallel.dim, "input '" + declared[i]->name + "'");
  }
  const std::string loss = loss_kind_name(settings_.trainer.training.loss.kind);
  if (trainer_->needs_target() && !target.defined()) raise("loss '" + loss + "' needs target=");
  if (!trainer_->needs_target() && target.defined())
    raise("loss 'none' takes no target: the model's output is the loss");
  if (target.defined()) {
    check_finite(target, 0, "target");
    if (labels_) check_class_labels(target, *labels_, "target");
  }
}

std::vector<Tensor> TrainingSession::transformed(std::vector<Tensor> inputs) const {
  const std::vector<std::string> names = model_->input_names();
  for (size_t i = 0; i < inputs.size() && i < names.size(); ++i)
    if (auto t = settings_.transforms.find(names[i]); t != settings_.transforms.end())
      inputs[i] = transform_all_rows(names[i], t->second, inputs[i]);
  return inputs;
}

std::optional<double> TrainingSession::step(std::vector<Tensor> inputs, Tensor target,
                                            std::exception_ptr input_error) {
  auto check = [&] {
    inputs = transformed(std::move(inputs));
    check_batch(inputs, target);
  };
  if (const DistributedJob* job = settings_.job.get()) {
    if (!input_error) try {
        check();
      } catch (const Error&) {
        input_error = std::current_exception();
      }
    job->group->set_stage(detail::concat("before step ", steps_done_ + 1));
    throw_if_any_rank_failed(*job->group, input_error);
  } else {
    if (input_error) std::rethrow_exception(input_error);
    check();
  }
  const int64_t n = settings_.accumulate;
  if (static_cast<int64_t>(pending_.size()) + 1 < n) {
    PendingBatch kept;  // copied: the caller may reuse its arrays before the step runs
    for (const Tensor& t : inputs) kept.inputs.push_back(t.clone());
    if (target.defined()) kept.target = target.clone();
    pending_.push_back(std::move(kept));
    return std::nullopt;
  }
  std::vector<PendingBatch> batches = std::move(pending_);
  pending_.clear();
  batches.push_back({std::move(inputs), std::move(target)});
  return run_step(std::move(batches));
}

double TrainingSession::run_step(std::vector<PendingBatch> batches) {
  const int64_t dim = settings_.trainer.parallel.dim;
  const std::vector<std::string> names = model_->input_names();
  const std::string first_name = names.empty() ? "target" : "input '" + names[0] + "'";
  auto rows_of = [&](const PendingBatch& b) {
    return b.inputs.empty() ? rows_along(b.target, 0, "the target")
                            : rows_along(b.inputs[0], dim, first_name);
  };
  const int64_t rows = rows_of(batches[0]);
  std::vector<Tensor> inputs;
  Tensor target;
  if (batches.size() == 1) {
    inputs = std::move(batches[0].inputs);
    target = std::move(batches[0].target);
  } else {
    // The step's batches as one data set of batches of `rows`: every batch but the last must
    // hold that many rows, as a step of `dprun train --accumulate` takes them.
    for (size_t j = 1; j < batches.size(); ++j) {
      const int64_t r = rows_of(batches[j]);
      const bool last = j + 1 == batches.size();
      if (last ? r > rows : r != rows)
        raise("accumulate: batch " + std::to_string(j + 1) + " of the step has " +
              std::to_string(r) + " rows but the first has " + std::to_string(rows) +
              "; every batch of a step but the last needs the first's rows (the last may have "
              "fewer)");
    }
    for (size_t i = 0; i < batches[0].inputs.size(); ++i) {
      std::vector<Tensor> parts;
      for (const PendingBatch& b : batches) parts.push_back(b.inputs[i]);
      inputs.push_back(concat(parts, dim, Device::cpu()));
    }
    if (batches[0].target.defined()) {
      std::vector<Tensor> parts;
      for (const PendingBatch& b : batches) parts.push_back(b.target);
      target = concat(parts, 0, Device::cpu());
    }
  }
  if (steps_done_ == 0 && batch_ == 0) batch_ = rows;
  TrainingData data(names, std::move(inputs), std::move(target),
                    TrainingDataOptions{.dim = dim, .batch = rows});
  const CheckpointedRun state = checkpointed_run();
  TrainingRun run(*trainer_, *optimizer_, data, state,
                  TrainingRunOptions{.steps = steps_done_ + 1,
                                     .accumulate = static_cast<int64_t>(batches.size()),
                                     .seed = settings_.seed,
                                     .group_lrs = group_lrs_,
                                     .rank_local_data = true},
                  ddp_.get());
  const std::vector<StepRecord> records = run.run(steps_done_);
  ++steps_done_;
  return records.back().loss;
}

ValidationResult TrainingSession::evaluate(std::vector<Tensor> inputs, Tensor target) {
  inputs = transformed(std::move(inputs));
  check_batch(inputs, target);
  const int64_t dim = settings_.trainer.parallel.dim;
  const std::vector<std::string> names = model_->input_names();
  const int64_t rows = inputs.empty() ? rows_along(target, 0, "the target")
                                      : rows_along(inputs[0], dim, "input '" + names[0] + "'");
  TrainingData data(names, std::move(inputs), std::move(target),
                    TrainingDataOptions{.dim = dim, .batch = rows});
  return Validation(*model_, settings_.trainer.training.loss, std::move(data)).run();
}

void TrainingSession::save(const std::string& path) {
  if (rank() != 0) return;
  TrainingRunFiles(path).save_model(*model_, steps_done_);
}

void TrainingSession::save_checkpoint(const std::string& path) {
  if (rank() != 0) return;
  const CheckpointedRun state = checkpointed_run();
  remove_stale_temporaries(path);
  dprun::save_checkpoint(path, state, steps_done_);
}

}  // namespace dprun::python
