#pragma once
// Dynamic loss scaling for float16 training, with the rules of PyTorch's
// torch.cuda.amp.GradScaler (1.13).
//
// float16's smallest normal value is 6e-5: many gradients of a float16 backward pass are smaller
// and would flush to zero. The loss is multiplied by a large scale before the backward pass, so
// the gradients it produces are as many times larger; the float32 gradients of the parameters
// are divided by it again before the optimizer reads them. When the scale is too large, some
// gradient overflows to infinity (or NaN): the step is then skipped and the scale halved. After
// growth_interval steps in a row without an overflow the scale doubles again.
//
// A Trainer that trains in float16 owns one and does all this in step(). By hand, as with
// PyTorch's scaler:
//
//   double loss = trainer.forward_backward(inputs, target);  // gradients of loss * scale()
//   GradScaler& scaler = *trainer.grad_scaler();
//   bool stepped = scaler.step(optimizer, trainer.gradients());  // unscaled; skipped on overflow
//   scaler.update();
#include <cstdint>
#include <optional>
#include <vector>

#include "engine/device.h"
#include "engine/tensor.h"
#include "engine/training/optimizer.h"
#include "engine/training/optimizer_update.h"

namespace dprun {

/// torch.cuda.amp.GradScaler's arguments and defaults.
struct GradScalerOptions {
  double init_scale = 65536.0;
  double growth_factor = 2.0;   // > 1
  double backoff_factor = 0.5;  // in (0, 1)
  int64_t growth_interval = 2000;
};

/// Not thread-safe: one training loop owns it.
class GradScaler {
 public:
  /// Throws Error on a scale that is not positive and finite, a growth factor not above 1, a
  /// backoff factor outside (0, 1) or a growth interval below 1.
  explicit GradScaler(GradScalerOptions options = {});

  /// The scale the loss is multiplied by (float32, as PyTorch keeps it).
  float scale() const { return scale_; }
  /// Divides every gradient by scale() in place (times the float32 reciprocal, as PyTorch does),
  /// on the device that holds it, and returns whether all of them were finite. Gradients must
  /// be float32 or float64. Once per step: throws Error when called again before update().
  bool unscale(const std::vector<Tensor>& gradients);
  /// scaler.step(optimizer): unscale() (unless it was called this step), then
  /// optimizer.step(gradients, workers) if every gradient was finite. Returns whether the
  /// optimizer stepped; a skipped step leaves the parameters and the optimizer's state as they
  /// were.
  bool step(Optimizer& optimizer, const std::vector<Tensor>& gradients,
            const std::vector<Device>& workers = {});
  /// scaler.update(): after an overflow, scale() times backoff_factor; after growth_interval
  /// finite steps in a row, times growth_factor (kept when the product is finite). Throws
  /// Error when no unscale() or step() ran since the last update().
  void update();

  /// Steps skipped for an overflow, since the scaler was made.
  int64_t skipped_steps() const { return skipped_steps_; }
  /// Finite steps in a row since the scale last changed or overflowed.
  int64_t growth_tracker() const { return growth_tracker_; }
  const GradScalerOptions& options() const { return options_; }
  /// Continues from a checkpoint's state (scale(), growth_tracker(), skipped_steps()). Throws
  /// Error on a scale that is not a positive float32 or negative counts.
  void restore(float scale, int64_t growth_tracker, int64_t skipped_steps);

 private:
  GradScalerOptions options_;
  float scale_;
  int64_t growth_tracker_ = 0;
  int64_t skipped_steps_ = 0;
  std::optional<bool> found_inf_;  // set by unscale(), cleared by update()
  UpdateKernelCache<GradientScaleKernel> kernels_;
};

}  // namespace dprun
