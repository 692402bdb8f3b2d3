#pragma once
// Optimizers with torch.optim's exact update rules (PyTorch 1.13, single-tensor forms), so a
// model trained here follows the parameters PyTorch would reach.
//
//   Sgd optimizer(trainer.parameters(), {.lr = 0.1, .momentum = 0.9});
//   optimizer.step(gradients);  // one gradient per parameter, same order
//
// Parameters are updated in place, on the device that holds them: on CPU devices by host loops,
// on GPUs by kernels queued on the device (the update kernels of optimizer_update.h, one element
// update shared by both). Every update kernel an optimizer needs is looked up when it is made.
#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/device.h"
#include "engine/tensor.h"
#include "engine/training/optimizer_update.h"

namespace dprun {

/// Updates a fixed list of parameter tensors from gradients, in place.
class Optimizer {
 public:
  explicit Optimizer(std::vector<Tensor> parameters);
  virtual ~Optimizer() = default;
  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;

  /// One update. `gradients[i]` belongs to parameters()[i] and must match its shape and
  /// dtype (float32 or float64); throws naming the index otherwise. A gradient on another
  /// device than its parameter's memory is copied there first. With `workers` (CPU devices),
  /// the elements of all host parameters are split over their worker threads (run_in_parts);
  /// every element's update is the same however they are split. Parameters on a GPU are
  /// updated on that GPU, on a stream of its own, and the step returns when they are done.
  void step(const std::vector<Tensor>& gradients, const std::vector<Device>& workers = {});
  /// step() in pieces, for a caller that fuses the update with other per-element work (the
  /// Trainer sums the replicas' gradients and copies the new values to them in the same
  /// pass): begin_step() counts the step, then update_range(i, gradient, begin, end) updates
  /// elements [begin, end) of parameter i, in host memory (CPU devices), from a host-memory
  /// gradient. One step's ranges must cover every parameter once; disjoint ranges may be
  /// updated concurrently.
  void begin_step() {
    ++steps_;
    first_non_finite_ = kNone;
    device_checks_pending_ = false;
  }
  void update_range(size_t i, const Tensor& gradient, int64_t begin, int64_t end);
  const std::vector<Tensor>& parameters() const { return parameters_; }
  /// Steps taken so far.
  int64_t steps() const { return steps_; }
  virtual double lr() const = 0;
  virtual void set_lr(double lr) = 0;
  /// Parameters updated without weight decay (a second torch.optim param group with
  /// weight_decay 0, as GPT recipes put biases and normalization weights in): `exempt[i]` for
  /// parameter i. Throws Error when the list's length is not the parameters'.
  void exempt_from_weight_decay(const std::vector<bool>& exempt);
  /// Learning rates of parameter groups (torch.optim param groups that set their own "lr",
  /// as fine-tuning gives a pretrained body a smaller one than a new head): parameter i is
  /// updated with `lrs[i]` where it is set, with lr() elsewhere; an empty list gives every
  /// parameter lr(). A schedule sets them at every step as it sets lr() (each group's lr is
  /// scheduled from its own base). Throws Error when the list's length is not the parameters'
  /// or an lr is negative or not finite.
  void set_parameter_lrs(std::vector<std::optional<double>> lrs);
  const std::vector<std::optional<double>>& parameter_lrs() const { return parameter_lrs_; }
  /// Which parameters exempt_from_weight_decay() exempts; empty when none is.
  const std::vector<bool>& decay_exemptions() const { return decay_exempt_; }

  /// After a step (step(), or begin_step() and its update_range() calls): the index of the
  /// first parameter, in parameters() order, that holds a NaN or an infinity after the update;
  /// nullopt when every updated element is finite (and before the first step). Each range is
  /// checked right after its update, while its elements are still in cache (parameters on a
  /// GPU by one read of each on the device after the step), so a run can stop before it saves
  /// a model that diverged. Only the updated parameters count: a step the loss scaler skips
  /// changes nothing.
  std::optional<size_t> non_finite_parameter() const;

  /// The optimizer's state, as PyTorch's optimizer.state_dict() holds it: the steps taken and
  /// the per-parameter buffers by name ("momentum_buffer.<i>", "exp_avg.<i>",
  /// "exp_avg_sq.<i>", i the parameter's index), sharing storage with the optimizer's own.
  struct State {
    int64_t steps = 0;
    std::map<std::string, Tensor> buffers;
  };
  State state() const { return {steps_, buffers()}; }
  /// Continues from `state` (a checkpoint's): copies each buffer's values into the
  /// optimizer's and sets the step count. Throws Error naming a buffer that is missing, extra,
  /// or of another shape or dtype; nothing changes then.
  void load_state(const State& state);

 protected:
  /// The per-parameter buffers by name (see state()).
  virtual std::map<std::string, Tensor> buffers() const = 0;
  /// The per-parameter buffers as lists aligned with the parameters, which update() writes.
  virtual std::vector<const std::vector<Tensor>*> state_lists() const = 0;
  /// `options` as parameter i is updated with them: without weight decay where exempt, with
  /// its group's lr where it has one.
  template <class Options>
  Options options_for(size_t i, const Options& options) const {
    Options o = options;
    if (i < decay_exempt_.size() && decay_exempt_[i]) o.weight_decay = 0;
    if (i < parameter_lrs_.size() && parameter_lrs_[i]) o.lr = *parameter_lrs_[i];
    return o;
  }
  /// Updates elements [begin, end) of parameter i (and of its state) with the parameter's
  /// update kernel; steps() already counts this step. `execution`: as the kernels take it (the
  /// GPU's context; null for host memory). Called concurrently for disjoint host ranges of one
  /// step.
  virtual void update(size_t i, ExecutionContext* execution, Tensor& parameter,
                      const Tensor& gradient, int64_t begin, int64_t end) = 0;
  /// The update kernel of each parameter, looked up in `cache` for its device type and dtype
  /// (K is SgdUpdateKernel or AdamUpdateKernel); throws Error when one is missing.
  template <class K>
  std::vector<const K*> kernels_for_parameters(UpdateKernelCache<K>& cache) const {
    std::vector<const K*> out;
    for (const Tensor& p : parameters_) out.push_back(&cache.get(p.device().type, p.dtype()));
    return out;
  }

 private:
  /// Updates the parameters that live on GPUs (not in host memory), device by device.
  void update_on_devices(const std::vector<Tensor>& gradients);
  /// Records parameter i as not finite when one of its host elements [begin, end) is not.
  void check_finite_range(size_t i, int64_t begin, int64_t end);
  /// Queues, on `execution` after the updates of the parameters `indices` in `memory` (an
  /// accelerator), the largest absolute value of each (NaN when one is NaN), read back only
  /// when non_finite_parameter() is asked: a training step's traffic stays its loss.
  void check_finite_on_device(Device memory, ExecutionContext* execution,
                              const std::vector<size_t>& indices);

  std::vector<Tensor> parameters_;
  std::vector<int64_t> counts_;     // elements of each parameter in host memory; 0 for the others
  int64_t total_elements_ = 0;      // of parameters in host memory
  bool on_devices_ = false;         // some parameters live on GPUs
  std::vector<bool> decay_exempt_;  // empty: every parameter decays
  std::vector<std::optional<double>> parameter_lrs_;  // empty: every parameter takes lr()
  int64_t steps_ = 0;
  // The lowest index of a parameter found not finite this step; kNone when none is. Ranges
  // of one step are checked concurrently.
  static constexpr size_t kNone = SIZE_MAX;
  mutable std::atomic<size_t> first_non_finite_{kNone};
  // By accelerator: each checked parameter's largest absolute value after the last step, on
  // the device (kept from step to step), and the parameters' indices.
  struct DeviceCheck {
    Tensor max_abs;
    std::vector<size_t> indices;
  };
  mutable std::map<Device, DeviceCheck> device_checks_;
  mutable bool device_checks_pending_ = false;
  UpdateKernelCache<GradientNormKernel> norm_kernels_{kGradientNormOp};
};

/// torch.optim.SGD: the momentum buffer starts as the first gradient.
class Sgd final : public Optimizer {
 public:
  /// Throws on a negative lr, momentum or weight decay, or Nesterov without momentum (or
  /// with dampening), as torch.optim.SGD does.
  Sgd(std::vector<Tensor> parameters, SgdOptions options);
  double lr() const override { return options_.lr; }
  void set_lr(double lr) override { options_.lr = lr; }
  const SgdOptions& options() const { return options_; }

 private:
  void update(size_t i, ExecutionContext* execution, Tensor& parameter, const Tensor& gradient,
              int64_t begin, int64_t end) override;
  std::map<std::string, Tensor> buffers() const override;
  std::vector<const std::vector<Tensor>*> state_lists() const override { return {&momentum_}; }
  SgdOptions options_;
  std::vector<Tensor> momentum_;
  UpdateKernelCache<SgdUpdateKernel> kernel_cache_{kSgdUpdateOp};  // owns kernels_
  std::vector<const SgdUpdateKernel*> kernels_;
};

/// torch.optim.Adam, or torch.optim.AdamW with decoupled_weight_decay.
class Adam final : public Optimizer {
 public:
  /// Throws on a negative lr or eps, or a beta outside [0, 1).
  Adam(std::vector<Tensor> parameters, AdamOptions options);
  double lr() const override { return options_.lr; }
  void set_lr(double lr) override { options_.lr = lr; }
  const AdamOptions& options() const { return options_; }

 private:
  void update(size_t i, ExecutionContext* execution, Tensor& parameter, const Tensor& gradient,
              int64_t begin, int64_t end) override;
  std::map<std::string, Tensor> buffers() const override;
  std::vector<const std::vector<Tensor>*> state_lists() const override {
    return {&exp_avg_, &exp_avg_sq_};
  }
  AdamOptions options_;
  std::vector<Tensor> exp_avg_, exp_avg_sq_;
  UpdateKernelCache<AdamUpdateKernel> kernel_cache_{kAdamUpdateOp};  // owns kernels_
  std::vector<const AdamUpdateKernel*> kernels_;
};

}  // namespace dprun
