#include "engine/autograd/trainer.h"

namespace dprun {

namespace {

DataParallelOptions training_parallel_options(DataParallelOptions options,
                                              const TrainingGraph& training) {
  if (!options.device_ids.empty()) {
    DPRUN_CHECK(!options.output_device || *options.output_device == options.device_ids[0],
                "training sums gradients on device_ids[0] (", options.device_ids[0].to_string(),
                "); output_device ", options.output_device->to_string(), " cannot be used");
  }
  options.input_splits[training.loss_weight] = InputSplit::share_of_rows();
  options.summed_outputs.insert(training.loss);
  for (const auto& name : training.parameters)
    options.summed_outputs.insert(gradient_output_name(name));
  return options;
}

Tensor scalar_of(DType dtype, double v) {
  return dtype == DType::Float64 ? Tensor::scalar<double>(v)
                                 : Tensor::scalar<float>(static_cast<float>(v));
}

}  // namespace

Trainer::Trainer(std::shared_ptr<Model> model, TrainerOptions options) : model_(std::move(model)) {
  DPRUN_CHECK(model_ != nullptr, "Trainer: no model given");
  training_ = build_training_graph(model_->graph(), options.training);
  ModelOptions compile;
  compile.channels_last = options.channels_last;
  training_model_ = share_parameters(*model_, training_.graph, compile);
  parallel_ = std::make_unique<DataParallel>(
      training_model_, training_parallel_options(std::move(options.parallel), training_));
}

std::vector<Tensor> Trainer::parameters() const {
  std::vector<Tensor> out;
  for (const auto& name : training_.parameters) out.push_back(model_->parameter(name));
  return out;
}

double Trainer::forward_backward(const std::vector<Tensor>& inputs, const Tensor& target,
                                 double loss_weight) {
  std::vector<Tensor> feeds = inputs;
  if (needs_target()) {
    DPRUN_CHECK(target.defined(), "the ", loss_kind_name(training_.loss_kind),
                " loss needs a target");
    feeds.push_back(target);
  } else {
    DPRUN_CHECK(!target.defined(), "the loss takes no target, but one was given");
  }
  feeds.push_back(scalar_of(training_.loss_dtype, loss_weight));
  std::vector<Tensor> outputs = parallel_->forward(feeds);
  gradients_.assign(outputs.begin() + 1, outputs.end());
  return outputs[0].item_as_double();
}

double Trainer::step(const std::vector<Tensor>& inputs, const Tensor& target,
                     Optimizer& optimizer) {
  double loss = forward_backward(inputs, target);
  optimizer.step(gradients_);
  model_->mark_parameters_changed();
  return loss;
}

}  // namespace dprun
