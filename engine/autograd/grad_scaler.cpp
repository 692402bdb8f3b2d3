#include "engine/autograd/grad_scaler.h"

#include <cmath>

#include "engine/backend.h"
#include "engine/error.h"

namespace dprun {

GradScaler::GradScaler(GradScalerOptions options)
    : options_(options), scale_(static_cast<float>(options.init_scale)) {
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

const GradientUnscaleKernel& GradScaler::kernel_for(DeviceType device, DType dtype) {
  std::unique_ptr<GradientUnscaleKernel>& kernel = kernels_[{device, dtype}];
  if (!kernel)
    kernel = create_update_kernel_as<GradientUnscaleKernel>(kUnscaleGradientOp, device, dtype);
  return *kernel;
}

bool GradScaler::unscale(const std::vector<Tensor>& gradients) {
  DPRUN_CHECK(!found_inf_, "loss scaling: the gradients were already unscaled this step; call ",
              "update() first");
  // PyTorch multiplies by the float32 reciprocal of the scale, computed in double.
  const float inv_scale = static_cast<float>(1.0 / static_cast<double>(scale_));
  // The gradients by where their memory is: the host (every CPU device) or one accelerator.
  std::map<Device, std::vector<Tensor>> by_memory;
  for (size_t i = 0; i < gradients.size(); ++i) {
    const Tensor& g = gradients[i];
    DPRUN_CHECK(g.dtype() == DType::Float32 || g.dtype() == DType::Float64,
                "loss scaling: gradient ", i, " is ", g.describe(),
                "; only float32 and float64 gradients are unscaled");
    by_memory[g.device().type == DeviceType::CPU ? Device::cpu() : g.device()].push_back(g);
  }
  bool found = false;
  for (auto& [device, tensors] : by_memory) {
    std::unique_ptr<ExecutionContext> context;
    if (device.type != DeviceType::CPU)
      context = backend_for(device).create_execution_context(device, {});
    Tensor flag = Tensor::zeros({1}, DType::Float32, device);
    for (Tensor& g : tensors)
      kernel_for(device.type, g.dtype()).unscale(context.get(), inv_scale, g, flag);
    if (context) context->synchronize();
    found = found || flag.to(Device::cpu()).data<float>()[0] != 0;
  }
  found_inf_ = found;
  return !found;
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
