#pragma once
// The update kernels of the optimizers, the loss scaler, gradient clipping and accumulation on
// simulated devices (engine/training/optimizer_update.h): the CPU's update, run with access to the
// device's memory opened. Their interface is not OpKernel::compute, so the generic wrapper of
// ops/sim/sim_kernels.cpp cannot carry them.
#include <memory>

#include "engine/kernel.h"

namespace dprun {

/// `host_kernel` wrapped for a simulated device when it is an update kernel (SgdUpdateKernel,
/// AdamUpdateKernel, GradientScaleKernel, GradientNormKernel,
/// GradientAddKernel), taking ownership of it; nullptr,
/// leaving it alone, otherwise.
std::unique_ptr<OpKernel> sim_update_kernel(std::unique_ptr<OpKernel>& host_kernel);

}  // namespace dprun
