#pragma once
// The per-element updates of dprun's optimizers (torch.optim's SGD and Adam/AdamW, PyTorch 1.13
// single-tensor forms), shared by the CPU loops (ops/training/optimizer_update.cpp) and the CUDA
// kernels (ops/training/optimizer_update.cu), so the CPU tests exercise the math the GPU runs.
//
// torch casts its scalar arguments to the tensor's type before each op; the functors hold the
// scalars already cast, and round once per op in torch's order. Each combination of settings
// is its own type with no branches inside, so the CPU loops vectorise. The make_* functions
// compute the scalars on the host in double, as torch does, and call f with the functor.
#include <cmath>
#include <cstdint>

#include "ops/math/host_device.h"

namespace dprun::math {

/// torch.optim.SGD on one element. kFirst: the first step, where the momentum buffer starts
/// as the (decayed) gradient.
template <class T, bool kDecay, bool kMomentum, bool kFirst, bool kNesterov>
struct SgdUpdate {
  static constexpr bool kUsesMomentum = kMomentum;
  T weight_decay, momentum, keep, neg_lr;  // keep = 1 - dampening

  /// The new value of parameter `p` with gradient `g`; updates the momentum buffer `buf`
  /// (untouched without momentum).
  DPRUN_HOST_DEVICE T operator()(T p, T g, T& buf) const {
    T d = g;
    if constexpr (kDecay) d = d + weight_decay * p;
    if constexpr (kMomentum) {
      T b = kFirst ? d : buf * momentum + keep * d;
      buf = b;
      d = kNesterov ? d + momentum * b : b;
    }
    return p + neg_lr * d;
  }
};

/// Calls f(SgdUpdate<T, ...>{...}) for these settings; `first` is the optimizer's first step.
template <class T, class F>
void with_sgd_update(double lr, double momentum, double dampening, double weight_decay,
                     bool nesterov, bool first, F&& f) {
  const T wd = static_cast<T>(weight_decay), m = static_cast<T>(momentum);
  const T keep = static_cast<T>(1 - dampening), neg_lr = static_cast<T>(-lr);
  auto call = [&]<bool kDecay, bool kMomentum, bool kFirst, bool kNesterov>() {
    f(SgdUpdate<T, kDecay, kMomentum, kFirst, kNesterov>{wd, m, keep, neg_lr});
  };
  auto with_momentum = [&]<bool kDecay>() {
    if (first)
      nesterov ? call.template operator()<kDecay, true, true, true>()
               : call.template operator()<kDecay, true, true, false>();
    else
      nesterov ? call.template operator()<kDecay, true, false, true>()
               : call.template operator()<kDecay, true, false, false>();
  };
  if (momentum == 0)
    weight_decay != 0 ? call.template operator()<true, false, false, false>()
                      : call.template operator()<false, false, false, false>();
  else if (weight_decay != 0)
    with_momentum.template operator()<true>();
  else
    with_momentum.template operator()<false>();
}

/// torch.optim.Adam on one element; AdamW (kDecoupled) decays the parameter first, Adam with a
/// weight decay (kL2) adds it to the gradient.
template <class T, bool kDecoupled, bool kL2>
struct AdamUpdate {
  T decay;  // 1 - lr * weight_decay (AdamW)
  T l2;     // weight_decay (Adam)
  T beta1, beta2, one_minus_beta1, one_minus_beta2;
  T neg_step_size;     // -lr / (1 - beta1^step)
  T correction2_sqrt;  // sqrt(1 - beta2^step)
  T eps;

  /// The new value of parameter `p` with gradient `g`; updates the averages `m` and `v`.
  DPRUN_HOST_DEVICE T operator()(T p, T g, T& m, T& v) const {
    if constexpr (kDecoupled) p = p * decay;
    T grad = g;
    if constexpr (kL2) grad = g + l2 * p;
    m = m * beta1 + one_minus_beta1 * grad;
    v = v * beta2 + one_minus_beta2 * (grad * grad);
    T denom = std::sqrt(v) / correction2_sqrt + eps;
    return p + neg_step_size * (m / denom);
  }
};

/// Calls f(AdamUpdate<T, ...>{...}) for these settings at step `step` (1 for the first).
template <class T, class F>
void with_adam_update(double lr, double beta1, double beta2, double eps, double weight_decay,
                      bool decoupled, int64_t step, F&& f) {
  const double correction1 = 1 - std::pow(beta1, static_cast<double>(step));
  const double correction2 = 1 - std::pow(beta2, static_cast<double>(step));
  auto call = [&]<bool kDecoupled, bool kL2>() {
    f(AdamUpdate<T, kDecoupled, kL2>{.decay = static_cast<T>(1 - lr * weight_decay),
                                     .l2 = static_cast<T>(weight_decay),
                                     .beta1 = static_cast<T>(beta1),
                                     .beta2 = static_cast<T>(beta2),
                                     .one_minus_beta1 = static_cast<T>(1 - beta1),
                                     .one_minus_beta2 = static_cast<T>(1 - beta2),
                                     .neg_step_size = static_cast<T>(-(lr / correction1)),
                                     .correction2_sqrt = static_cast<T>(std::sqrt(correction2)),
                                     .eps = static_cast<T>(eps)});
  };
  if (weight_decay == 0)
    call.template operator()<false, false>();
  else if (decoupled)
    call.template operator()<true, false>();
  else
    call.template operator()<false, true>();
}

}  // namespace dprun::math
