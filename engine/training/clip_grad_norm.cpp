#include "engine/training/clip_grad_norm.h"

#include <algorithm>
#include <cmath>

#include "engine/error.h"
#include "engine/training/optimizer_update.h"

namespace dprun {

namespace {

/// PyTorch's clip coefficient in the gradients' type T: max_norm / (total + 1e-6), as
/// `max_norm / t` evaluates (the reciprocal of t, times max_norm), clamped at 1.
template <class T>
T clip_coefficient(T total, double max_norm) {
  const T denominator = total + static_cast<T>(1e-6);
  const T coefficient = (T(1) / denominator) * static_cast<T>(max_norm);
  return std::isnan(coefficient) ? coefficient : std::min(coefficient, T(1));
}

/// The per-tensor norms (sums of squares or largest absolute values, in double), each on the
/// device that holds its tensor, read back once per device.
std::vector<double> tensor_norms(const std::vector<Tensor>& gradients, bool infinity) {
  UpdateKernelCache<GradientNormKernel> kernels(kGradientNormOp);
  std::vector<double> norms(gradients.size());
  for_each_memory(
      gradients, {},
      [&](Device memory, ExecutionContext* execution, const std::vector<size_t>& indices) {
        Tensor out = Tensor::zeros({static_cast<int64_t>(indices.size())}, DType::Float64, memory);
        for (size_t k = 0; k < indices.size(); ++k) {
          const Tensor& g = gradients[indices[k]];
          kernels.get(memory.type, g.dtype())
              .norm(execution, g, infinity, out, static_cast<int64_t>(k));
        }
        // The host reads the norms next.
        if (execution) execution->synchronize();
        const Tensor host = out.to(Device::cpu());
        for (size_t k = 0; k < indices.size(); ++k) norms[indices[k]] = host.data<double>()[k];
      });
  return norms;
}

template <class T>
double clip(const std::vector<Tensor>& gradients, double max_norm, bool infinity) {
  // Each tensor's norm rounded to T, as torch.norm returns it; the total is their norm.
  double total = 0;
  for (double n : tensor_norms(gradients, infinity)) {
    const double rounded = static_cast<T>(infinity ? n : std::sqrt(n));
    total = infinity ? (std::isnan(rounded) || rounded > total ? rounded : total)
                     : total + rounded * rounded;
    if (infinity && std::isnan(total)) break;
  }
  const T norm = static_cast<T>(infinity ? total : std::sqrt(total));
  const T coefficient = clip_coefficient<T>(norm, max_norm);
  if (coefficient == T(1)) return norm;  // PyTorch multiplies by 1: nothing changes
  UpdateKernelCache<GradientScaleKernel> kernels(kScaleGradientOp);
  scale_gradients(gradients, static_cast<double>(coefficient), kernels);
  return norm;
}

}  // namespace

double clip_grad_norm(const std::vector<Tensor>& gradients, double max_norm, double norm_type) {
  DPRUN_CHECK(max_norm > 0 && std::isfinite(max_norm), "gradient clipping: max_norm ", max_norm,
              " is not a positive number");
  DPRUN_CHECK(norm_type == 2.0 || norm_type == kInfinityNorm, "gradient clipping: norm_type ",
              norm_type, " is not 2 or infinity");
  if (gradients.empty()) return 0;
  const DType dtype = gradients[0].dtype();
  for (size_t i = 0; i < gradients.size(); ++i)
    DPRUN_CHECK(
        gradients[i].dtype() == dtype && (dtype == DType::Float32 || dtype == DType::Float64),
        "gradient clipping: gradient ", i, " is ", gradients[i].describe(),
        "; the gradients must be all float32 or all float64");
  const bool infinity = norm_type == kInfinityNorm;
  return dtype == DType::Float64 ? clip<double>(gradients, max_norm, infinity)
                                 : clip<float>(gradients, max_norm, infinity);
}

}  // namespace dprun
