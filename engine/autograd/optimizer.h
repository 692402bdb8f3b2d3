#pragma once
// Optimizers with torch.optim's exact update rules (PyTorch 1.13, single-tensor forms), so a
// model trained here follows the parameters PyTorch would reach.
//
//   Sgd optimizer(trainer.parameters(), {.lr = 0.1, .momentum = 0.9});
//   optimizer.step(gradients);  // one gradient per parameter, same order
//
// Parameters are updated in place; they must live in host memory (CPU devices).
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/device.h"
#include "engine/tensor.h"

namespace dprun {

/// Updates a fixed list of parameter tensors from gradients, in place.
class Optimizer {
 public:
  explicit Optimizer(std::vector<Tensor> parameters);
  virtual ~Optimizer() = default;
  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;

  /// One update. `gradients[i]` belongs to parameters()[i] and must match its shape and
  /// dtype (float32 or float64); throws naming the index otherwise. With `workers` (CPU
  /// devices), the elements of all parameters are split over their worker threads
  /// (run_in_parts); every element's update is the same however they are split.
  void step(const std::vector<Tensor>& gradients, const std::vector<Device>& workers = {});
  /// step() in pieces, for a caller that fuses the update with other per-element work (the
  /// Trainer sums the replicas' gradients and copies the new values to them in the same
  /// pass): begin_step() counts the step, then update_range(i, gradient, begin, end) updates
  /// elements [begin, end) of parameter i from a host-memory gradient. One step's ranges must
  /// cover every parameter once; disjoint ranges may be updated concurrently.
  void begin_step() { ++steps_; }
  void update_range(size_t i, const Tensor& gradient, int64_t begin, int64_t end);
  const std::vector<Tensor>& parameters() const { return parameters_; }
  /// Steps taken so far.
  int64_t steps() const { return steps_; }
  virtual double lr() const = 0;
  virtual void set_lr(double lr) = 0;

 protected:
  /// Updates elements [begin, end) of parameter i (and of its state); steps() already counts
  /// this step. Called concurrently for disjoint ranges of one step.
  virtual void update(size_t i, Tensor& parameter, const Tensor& gradient, int64_t begin,
                      int64_t end) = 0;

 private:
  std::vector<Tensor> parameters_;
  std::vector<int64_t> counts_;  // elements of each parameter
  int64_t total_elements_ = 0;
  int64_t steps_ = 0;
};

struct SgdOptions {
  double lr = 0.01;
  double momentum = 0;
  double dampening = 0;
  double weight_decay = 0;  // L2: added to the gradient
  bool nesterov = false;
};

/// torch.optim.SGD: the momentum buffer starts as the first gradient.
class Sgd final : public Optimizer {
 public:
  /// Throws on a negative lr, momentum or weight decay, or Nesterov without momentum (or
  /// with dampening), as torch.optim.SGD does.
  Sgd(std::vector<Tensor> parameters, SgdOptions options);
  double lr() const override { return options_.lr; }
  void set_lr(double lr) override { options_.lr = lr; }

 private:
  void update(size_t i, Tensor& parameter, const Tensor& gradient, int64_t begin,
              int64_t end) override;
  SgdOptions options_;
  std::vector<Tensor> momentum_;
};

struct AdamOptions {
  double lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  /// Adam: L2 added to the gradient. AdamW: decoupled decay (torch's default there is 0.01).
  double weight_decay = 0;
  bool decoupled_weight_decay = false;
};

/// torch.optim.Adam, or torch.optim.AdamW with decoupled_weight_decay.
class Adam final : public Optimizer {
 public:
  /// Throws on a negative lr or eps, or a beta outside [0, 1).
  Adam(std::vector<Tensor> parameters, AdamOptions options);
  double lr() const override { return options_.lr; }
  void set_lr(double lr) override { options_.lr = lr; }

 private:
  void update(size_t i, Tensor& parameter, const Tensor& gradient, int64_t begin,
              int64_t end) override;
  AdamOptions options_;
  std::vector<Tensor> exp_avg_, exp_avg_sq_;
};

}  // namespace dprun
