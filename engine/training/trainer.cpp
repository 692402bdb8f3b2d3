#include "engine/training/trainer.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "engine/parallel/comm.h"
#include "engine/parallel/replicate.h"
#include "engine/parallel/run_in_parts.h"
#include "engine/training/clip_grad_norm.h"
#include "engine/training/gradient_accumulation.h"

namespace dprun {

namespace {

// Below this many parameter elements in all, one thread does the fused update.
constexpr int64_t kMinParallelElements = 1 << 15;

DataParallelOptions training_parallel_options(DataParallelOptions options,
                                              const TrainingGraph& training) {
  if (!options.device_ids.empty()) {
    DPRUN_CHECK(!options.output_device || *options.output_device == options.device_ids[0],
                "training sums gradients on device_ids[0] (", options.device_ids[0].to_string(),
                "); output_device ", options.output_device->to_string(), " cannot be used");
  }
  // A loss averaged over the targets it does not ignore weighs each replica by its count of
  // them, so that the replicas sum to the mean over the whole batch's, as PyTorch's loss over
  // the gathered outputs.
  options.input_splits[training.loss_weight] =
      training.ignored_target
          ? InputSplit::share_of_counted(training.target, *training.ignored_target)
          : InputSplit::share_of_rows();
  options.summed_outputs.insert(training.loss);
  for (const auto& name : training.parameters)
    options.summed_outputs.insert(gradient_output_name(name));
  return options;
}

Tensor scalar_of(DType dtype, double v) {
  return dtype == DType::Float64 ? Tensor::scalar<double>(v)
                                 : Tensor::scalar<float>(static_cast<float>(v));
}

// out[first, last) = parts[0] + parts[1] + ..., in list order (as reduce_add sums).
template <class T>
void sum_range(const std::vector<const Tensor*>& parts, Tensor& out, int64_t first, int64_t last) {
  T* o = out.data<T>();
  const T* a = parts[0]->data<T>();
  if (parts.size() == 1) {
    std::memcpy(o + first, a + first, static_cast<size_t>(last - first) * sizeof(T));
    return;
  }
  const T* b = parts[1]->data<T>();
  for (int64_t i = first; i < last; ++i) o[i] = a[i] + b[i];
  for (size_t p = 2; p < parts.size(); ++p) {
    const T* c = parts[p]->data<T>();
    for (int64_t i = first; i < last; ++i) o[i] += c[i];
  }
}

}  // namespace

Trainer::Trainer(std::shared_ptr<Model> model, TrainerOptions options) : model_(std::move(model)) {
  DPRUN_CHECK(model_ != nullptr, "Trainer: no model given");
  training_ = build_training_graph(model_->graph(), options.training);
  ModelOptions compile;
  compile.channels_last = options.channels_last;
  compile.plan = model_->plan()->options();  // as the model was compiled
  training_model_ = share_parameters(*model_, training_.graph, compile);
  devices_ = options.parallel.device_ids;
  if (options.training.precision == DType::Float16)
    scaler_ = std::make_unique<GradScaler>(options.loss_scaling);
  DPRUN_CHECK(options.max_grad_norm >= 0 && std::isfinite(options.max_grad_norm),
              "Trainer: max_grad_norm ", options.max_grad_norm, " is not a positive number or 0");
  max_grad_norm_ = options.max_grad_norm;
  parallel_ = std::make_unique<DataParallel>(
      training_model_, training_parallel_options(std::move(options.parallel), training_));
  // Where each trainable parameter sits in the training model's (and replicas') parameters.
  std::vector<std::string> slots = training_model_->parameter_names();
  slot_parameter_.assign(slots.size(), -1);
  for (size_t k = 0; k < training_.parameters.size(); ++k)
    for (size_t s = 0; s < slots.size(); ++s)
      if (slots[s] == training_.parameters[k]) slot_parameter_[s] = static_cast<int64_t>(k);
}

std::vector<Tensor> Trainer::parameters() const {
  std::vector<Tensor> out;
  for (const auto& name : training_.parameters) out.push_back(model_->parameter(name));
  return out;
}

std::vector<Tensor> Trainer::feeds(const std::vector<Tensor>& inputs, const Tensor& target,
                                   double loss_weight) const {
  std::vector<Tensor> feeds = inputs;
  if (needs_target()) {
    DPRUN_CHECK(target.defined(), "the ", loss_kind_name(training_.loss_kind),
                " loss needs a target");
    // Checked here, before the scatter reads the target (to count the targets a class loss
    // ignores), so a wrong dtype is named as the model names it.
    const auto declared = training_.graph->type_of(training_.target);
    DPRUN_CHECK(!declared || declared->dtype == target.dtype(), "input '", training_.target,
                "' expects dtype ", dtype_name(declared->dtype), " but got ",
                dtype_name(target.dtype()));
    feeds.push_back(target);
  } else {
    DPRUN_CHECK(!target.defined(), "the loss takes no target, but one was given");
  }
  feeds.push_back(scalar_of(training_.loss_dtype, loss_weight));
  return feeds;
}

std::optional<int64_t> Trainer::counted_targets(const Tensor& target) const {
  if (!training_.ignored_target) return std::nullopt;
  // A target the forward pass will refuse counts 0 here rather than throwing: a distributed
  // rank counts before an exchange that every rank must reach.
  if (!target.defined() || target.dtype() != DType::Int64) return 0;
  const Tensor host = target.to(Device::cpu());
  const int64_t* v = host.data<int64_t>();
  return static_cast<int64_t>(std::count_if(
      v, v + host.numel(), [&](int64_t x) { return x != *training_.ignored_target; }));
}

double Trainer::forward_backward(const std::vector<Tensor>& inputs, const Tensor& target,
                                 double loss_weight, bool accumulate) {
  DPRUN_CHECK(!accumulate || !gradients_.empty(),
              "Trainer: nothing to accumulate into: no forward_backward ran yet");
  // In float16 the loss is scaled through its weight: the gradient every replica starts its
  // backward pass from is the scale times its share.
  const double scale = scaler_ ? scaler_->scale() : 1.0;
  std::vector<Tensor> all = feeds(inputs, target, loss_weight * scale);
  // An optimizer may have updated the parameters in place since the last call without telling
  // the model (optimizer.step(gradients()) after forward_backward, as in PyTorch): refresh
  // the replicas from them.
  model_->mark_parameters_changed();
  replicas_current_ = false;  // the caller may update the parameters before the next call
  std::vector<Tensor> outputs = parallel_->forward(all);
  std::vector<Tensor> gradients(outputs.begin() + 1, outputs.end());
  if (accumulate)
    add_gradients(gradients_, gradients);
  else
    gradients_ = std::move(gradients);
  // The loss may sit on a GPU. A power-of-two scale divides out exactly.
  return outputs[0].to(Device::cpu()).item_as_double() / scale;
}

bool Trainer::can_fuse(const Optimizer& optimizer) const {
  // With loss scaling or clipping every gradient is read before any parameter is updated.
  if (devices_.size() < 2 || scaler_ || max_grad_norm_ > 0) return false;
  for (const Device& d : devices_)
    if (d.type != DeviceType::CPU) return false;
  for (const Tensor& p : training_model_->parameters())
    if (p.dtype() == DType::String) return false;
  // The optimizer must update exactly the trainer's parameters, in its order.
  const auto& updated = optimizer.parameters();
  if (updated.size() != training_.parameters.size()) return false;
  std::vector<Tensor> own = parameters();
  for (size_t k = 0; k < own.size(); ++k)
    if (!updated[k].shares_storage_with(own[k])) return false;
  return true;
}

double Trainer::step(const std::vector<Tensor>& inputs, const Tensor& target,
                     Optimizer& optimizer) {
  if (!can_fuse(optimizer)) {
    double loss = forward_backward(inputs, target);
    // The devices' workers are idle between steps: the update is split over them.
    update(optimizer, gradients_, devices_);
    model_->mark_parameters_changed();
    return loss;
  }
  return fused_step(inputs, target, optimizer);
}

bool Trainer::update(Optimizer& optimizer, const std::vector<Tensor>& gradients,
                     const std::vector<Device>& workers) {
  // As PyTorch's loop: scaler.unscale_(optimizer), clip_grad_norm_, scaler.step, scaler.update.
  if (scaler_) scaler_->unscale(gradients);
  if (max_grad_norm_ > 0) last_grad_norm_ = clip_grad_norm(gradients, max_grad_norm_);
  if (!scaler_) {
    optimizer.step(gradients, workers);
    return true;
  }
  const bool stepped = scaler_->step(optimizer, gradients, workers);
  scaler_->update();
  return stepped;
}

double Trainer::fused_step(const std::vector<Tensor>& inputs, const Tensor& target,
                           Optimizer& optimizer) {
  std::vector<Tensor> all = feeds(inputs, target, 1.0);
  // Unless the last call was a step(), which left the replicas current, refresh them.
  if (!replicas_current_) model_->mark_parameters_changed();
  std::vector<std::vector<Tensor>> outputs = parallel_->forward_per_replica(all);

  std::vector<Tensor> losses;
  for (const auto& replica : outputs) losses.push_back(replica[0]);
  const double loss = reduce_add(losses, devices_[0]).item_as_double();
  const std::vector<Tensor> own = parameters();
  gradients_.clear();
  for (const Tensor& p : own)
    gradients_.push_back(Tensor::empty(p.shape(), p.dtype(), devices_[0]));

  // One pass, split over the devices' workers: each element of a trainable parameter is
  // summed over the replicas (in device order, as reduce_add does), updated, and copied to
  // the other replicas; every other parameter (BatchNorm statistics) is copied.
  const std::vector<Tensor>& slots = training_model_->parameters();
  std::vector<std::shared_ptr<Model>> replicas = parallel_->replicas();
  std::vector<int64_t> counts = element_counts(slots);
  int64_t total = 0;
  for (int64_t c : counts) total += c;
  optimizer.begin_step();
  run_in_parts(devices_, total, kMinParallelElements, [&](int64_t begin, int64_t end) {
    for_each_piece(counts, begin, end, [&](size_t s, int64_t first, int64_t last) {
      if (int64_t k = slot_parameter_[s]; k >= 0) {
        std::vector<const Tensor*> parts;
        for (const auto& replica : outputs) parts.push_back(&replica[static_cast<size_t>(k) + 1]);
        Tensor& g = gradients_[static_cast<size_t>(k)];
        if (g.dtype() == DType::Float64)
          sum_range<double>(parts, g, first, last);
        else
          sum_range<float>(parts, g, first, last);
        optimizer.update_range(static_cast<size_t>(k), g, first, last);
      }
      const size_t element = dtype_size(slots[s].dtype());
      const char* from = static_cast<const char*>(slots[s].raw_data());
      for (size_t r = 1; r < replicas.size(); ++r) {
        Tensor to = replicas[r]->parameters()[s];  // a handle on the replica's storage
        if (to.shares_storage_with(slots[s])) continue;
        std::memcpy(static_cast<char*>(to.raw_data()) + first * element, from + first * element,
                    static_cast<size_t>(last - first) * element);
      }
    });
  });
  model_->mark_parameters_changed();  // for other users of the model
  for (size_t r = 1; r < replicas.size(); ++r) mark_replica_written(*training_model_, *replicas[r]);
  parallel_->mark_replicas_current();
  replicas_current_ = true;
  return loss;
}

}  // namespace dprun
