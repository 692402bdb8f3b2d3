#include "engine/training/grad_scaler.h"

#include <cmath>

#include "engine/error.h"

namespace dprun {

GradScaler::GradScaler(GradScalerOptions options)
    : options_(options),
      scale_(static_cast<float>(options.init_scale)),
      kernels_(kScaleGradientOp) {
  DPRUN_CHECK(std::isfinite(scale_) && scale_ > 0, "loss scaling: the initial scale ",
              options.init_scale, " is not a positive float32");
  DPRUN_CHECK(options.growth_factor > 1, "loss scaling: the growth factor ", options.growth_factor,
              " is not above 1");
  DPRUN_CHECK(options.backoff_factor > 0 && options.backoff_factor < 1,
              "loss scaling: the backoff factor ", options.backoff_factor,
              " is not between 0 and 1");
  DPRUN_CHECK(options.growth_interval >= 1, "loss scaling: the growth interval ",
              options.growth_interval, " is not a positive number of steps");
}

void GradScaler::restore(float scale, int64_t growth_tracker, int64_t skipped_steps) {
  DPRUN_CHECK(std::isfinite(scale) && scale > 0, "loss scaling: a saved scale of ", scale);
  DPRUN_CHECK(growth_tracker >= 0 && skipped_steps >= 0, "loss scaling: saved counts ",
              growth_tracker, " and ", skipped_steps);
  scale_ = scale;
  growth_tracker_ = growth_tracker;
  skipped_steps_ = skipped_steps;
  found_inf_.reset();
}

bool GradScaler::unscale(const std::vector<Tensor>& gradients) {
  DPRUN_CHECK(!found_inf_, "loss scaling: the gradients were already unscaled this step; call ",
              "update() first");
  for (size_t i = 0; i < gradients.size(); ++i)
    DPRUN_CHECK(gradients[i].dtype() == DType::Float32 || gradients[i].dtype() == DType::Float64,
                "loss scaling: gradient ", i, " is ", gradients[i].describe(),
                "; only float32 and float64 gradients are unscaled");
  // PyTorch multiplies by the float32 reciprocal of the scale, computed in double.
  const float inv_scale = static_cast<float>(1.0 / static_cast<double>(scale_));
  const bool finite = scale_gradients(gradients, inv_scale, kernels_);
  found_inf_ = !finite;
  return finite;
}

bool GradScaler::step(Optimizer& optimizer, const std::vector<Tensor>& gradients,
                      const std::vector<Device>& workers) {
  if (!found_inf_) unscale(gradients);
  if (*found_inf_) {
    ++skipped_steps_;
    return false;
  }
  optimizer.step(gradients, workers);
  return true;
}

void GradScaler::update() {
  DPRUN_CHECK(found_inf_.has_value(),
              "loss scaling: update() needs the gradients of a step checked first (unscale() or "
              "step())");
  if (*found_inf_) {
    scale_ = static_cast<float>(static_cast<double>(scale_) * options_.backoff_factor);
    growth_tracker_ = 0;
  } else if (++growth_tracker_ == options_.growth_interval) {
    const auto grown = static_cast<float>(static_cast<double>(scale_) * options_.growth_factor);
    if (std::isfinite(grown)) scale_ = grown;
    growth_tracker_ = 0;
  }
  found_inf_.reset();
}

}  // namespace dprun
