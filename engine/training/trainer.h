#pragma once
// Data-parallel training of a Model: PyTorch's DataParallel training step, in one call.
//
//   auto model = std::make_shared<Model>(load_model("mlp.onnx", Device::cpu(0)));
//   TrainerOptions options;
//   options.training.loss = {.kind = LossKind::CrossEntropy};
//   options.parallel.device_ids = parse_device_list("cpu:0,cpu:1");
//   Trainer trainer(model, options);
//   Sgd optimizer(trainer.parameters(), {.lr = 0.1, .momentum = 0.9});
//   double loss = trainer.step({images}, labels, optimizer);
//   save_model(*model, "trained.onnx");
//
// Each step splits the batch over the devices, every replica runs the training graph
// (engine/autograd/training_graph.h) on its chunk with its loss weighted by its share of the
// rows (of the targets not ignored, for a class loss with ignore_index), and the replicas'
// losses and gradients are summed on device_ids[0] in device order:
// the step is the whole batch's, however it was split, and it is deterministic. The
// optimizer then updates the model's parameters in place and the replicas get the new values
// before the next step (in step(), in the same pass as the update). BatchNormalization in
// training mode uses each replica's own batch statistics and keeps the running statistics of
// replica 0's chunk, as PyTorch does.
//
// On GPUs (cuda:N device lists) the same step runs on the devices: the replicas get the
// parameters by one NCCL broadcast from device_ids[0], their gradients are summed onto
// device_ids[0] by one NCCL reduce, and the optimizer updates the parameters there with its GPU
// kernels. NCCL picks its own summation order (engine/backends/cuda/nccl_collectives.h), so on
// GPUs one-device and multi-device steps agree within float rounding, not bit for bit.
//
// Training in float16 (TrainingGraphSpec::precision) scales the loss dynamically, as PyTorch's
// GradScaler does (grad_scaler.h): step() computes the gradients of the loss times the scale,
// divides them by it and skips the update when one overflowed. With max_grad_norm, step()
// clips the (unscaled) gradients by their total norm before the update (clip_grad_norm.h).
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/autograd/training_graph.h"
#include "engine/model.h"
#include "engine/parallel/data_parallel.h"
#include "engine/training/grad_scaler.h"
#include "engine/training/optimizer.h"

namespace dprun {

struct TrainerOptions {
  TrainingGraphSpec training;
  /// Devices, split dim and policy, threads. The trainer adds its own rules for the target
  /// (split like the inputs unless input_splits names "target"), the loss weight and the
  /// summed outputs; results land on device_ids[0], so output_device must be unset or equal.
  DataParallelOptions parallel;
  /// Let the CPU backend run the training graph's convolution chains channels-last
  /// (ModelOptions::channels_last), as inference does. Off by default: the bundled training
  /// cases match PyTorch with it, but training-mode BatchNormalization has no channels-last
  /// kernel, so each Conv of a CNN becomes a chain of its own between two transposes and a
  /// ResNet-18 step gains nothing (bench/README.md, Training throughput against PyTorch).
  bool channels_last = false;
  /// The loss scaling of float16 training (unused in other precisions).
  GradScalerOptions loss_scaling;
  /// When positive, step() clips the gradients to this total 2-norm
  /// (torch.nn.utils.clip_grad_norm_) before the update.
  double max_grad_norm = 0;
};

/// Thread safety: as DataParallel, calls are serialized; parameters change only in step().
class Trainer {
 public:
  /// Builds and compiles the training graph of `model` (whose parameters it shares). Throws
  /// Error naming every node without a gradient rule, and as DataParallel does for devices.
  Trainer(std::shared_ptr<Model> model, TrainerOptions options);

  /// Forward and backward over one batch: `inputs` in model().input_names() order and
  /// `target` (undefined when the loss takes none). Returns the batch's mean loss times
  /// `loss_weight`; gradients() then holds its gradients (of the weighted loss), on
  /// device_ids[0]. Parameters are not changed. A rank of DistributedDataParallel passes its
  /// shard's share of the global batch's rows (of its counted targets, counted_targets) as the
  /// weight. The replicas are refreshed from the model's parameters first, so
  /// `optimizer.step(trainer.gradients())` between two calls is seen on every device, as after
  /// loss.backward(); optimizer.step() in PyTorch. In float16 the gradients are those of the
  /// loss times grad_scaler()->scale() (the loss returned is not scaled), until the scaler
  /// unscales them.
  ///
  /// With `accumulate`, the batch's gradients are added to gradients() instead of replacing
  /// them (PyTorch's backward() without zero_grad()): k calls with loss_weight rows_i / rows,
  /// then one update(), train on the k batches as on one of all their rows (with
  /// counted_targets, loss_weight counted_i / counted instead).
  double forward_backward(const std::vector<Tensor>& inputs, const Tensor& target = {},
                          double loss_weight = 1.0, bool accumulate = false);
  /// What a batch (or a rank's shard) weighs in a step split into several, for a loss averaged
  /// over the targets it does not ignore (cross_entropy and nll with an ignore index): the
  /// count of `target`'s elements that are not ignored (0 for an undefined target or one that
  /// is not int64, which the forward pass then refuses). nullopt for every other loss, whose
  /// batches weigh by their rows. A step's batches then weigh counted_i / sum of counted (0
  /// each when nothing is counted), as the replicas of one batch do, so the step is the mean
  /// over all its counted targets however it is split; with no target ignored this is the
  /// share of the rows, exactly (rows_i * k / (rows * k) rounds as rows_i / rows).
  std::optional<int64_t> counted_targets(const Tensor& target) const;
  /// forward_backward, then `optimizer.step(gradients())`, then marks the model's parameters
  /// changed. Returns the loss. On several CPU devices, with an optimizer made from
  /// parameters(), the replicas' gradients are summed, the update is made and its result is
  /// copied to the replicas in one pass split over the devices' worker threads (the same
  /// values as the separate calls). Between two step() calls the replicas are then current;
  /// code that changes the parameters in place in between must call
  /// model().mark_parameters_changed() (set_parameter does). In float16, the scaler unscales
  /// the gradients and skips the update when one overflowed (grad_scaler()->skipped_steps()
  /// counts them), then updates its scale.
  double step(const std::vector<Tensor>& inputs, const Tensor& target, Optimizer& optimizer);

  /// What step() does after the backward pass, for a caller that computed `gradients` itself
  /// (DistributedDataParallel, after summing the ranks'): in float16 unscales them, clips them
  /// when max_grad_norm is set, and runs `optimizer.step(gradients, workers)` unless the scaler
  /// found an overflow (then skipped; its scale is updated either way). Returns whether the
  /// optimizer stepped. `gradients` are changed in place.
  bool update(Optimizer& optimizer, const std::vector<Tensor>& gradients,
              const std::vector<Device>& workers = {});
  /// The seed of the random ops (Dropout) of the forward passes that follow
  /// (DataParallel::set_random_seed: replica i draws from stream i of it). A run that sets the
  /// same seed before each step repeats, on one device or several; `dprun train` derives one
  /// per batch from --seed, the rank and the batch's index. nullopt (the default): fresh
  /// entropy.
  void set_random_seed(std::optional<uint64_t> seed) { parallel_->set_random_seed(seed); }
  /// The total norm of the gradients of the last update, before clipping; nullopt without
  /// max_grad_norm.
  std::optional<double> last_grad_norm() const { return last_grad_norm_; }

  /// Gradients of the last forward_backward or step (summed over the calls that accumulated
  /// into them), in parameter_names() order.
  const std::vector<Tensor>& gradients() const { return gradients_; }
  /// The trainable parameters, sharing storage with the model's: give them to an optimizer.
  std::vector<Tensor> parameters() const;
  const std::vector<std::string>& parameter_names() const { return training_.parameters; }
  const TrainingGraph& training_graph() const { return training_; }
  bool needs_target() const { return !training_.target.empty(); }
  Model& model() { return *model_; }
  /// The compiled training graph, sharing the model's parameters (compiled with the model's
  /// PlanOptions).
  const Model& training_model() const { return *training_model_; }
  /// The loss scaler of float16 training; null in other precisions.
  GradScaler* grad_scaler() { return scaler_.get(); }
  const GradScaler* grad_scaler() const { return scaler_.get(); }
  /// The devices each step is split over (options.parallel.device_ids).
  const std::vector<Device>& devices() const { return devices_; }
  /// What the last step's DataParallel call did (devices, rows, timings).
  DataParallelRun last_run() const { return parallel_->last_run(); }

 private:
  std::shared_ptr<Model> model_;
  TrainingGraph training_;
  std::shared_ptr<Model> training_model_;
  std::unique_ptr<DataParallel> parallel_;
  /// The feeds of the training graph: inputs, the target when the loss takes one, loss_weight.
  std::vector<Tensor> feeds(const std::vector<Tensor>& inputs, const Tensor& target,
                            double loss_weight) const;
  /// Whether step() can fuse the update with the gradient sum and the replica copies.
  bool can_fuse(const Optimizer& optimizer) const;
  /// step() when can_fuse(): forward and backward on every replica, then one pass that sums
  /// the gradients, updates the parameters and copies them to the replicas.
  double fused_step(const std::vector<Tensor>& inputs, const Tensor& target, Optimizer& optimizer);

  std::unique_ptr<GradScaler> scaler_;  // float16 training only
  double max_grad_norm_ = 0;
  std::optional<double> last_grad_norm_;
  std::vector<Tensor> gradients_;
  std::vector<Device> devices_;  // options.parallel.device_ids
  /// For each parameter of the training model (plan order), its index in parameter_names(),
  /// or -1 when it is not trained.
  std::vector<int64_t> slot_parameter_;
  bool replicas_current_ = false;  // the last call was a fused step()
};

}  // namespace dprun
