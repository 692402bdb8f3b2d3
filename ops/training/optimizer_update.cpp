// The optimizers' update kernels on CPU devices (engine/training/optimizer_update.h): host
// loops over a range of elements, one per combination of settings, so that the compiler
// vectorises each (this file is compiled without errno for sqrt, see ops/CMakeLists.txt).
#include "engine/training/optimizer_update.h"

#include <cmath>

#include "ops/math/optimizer_functors.h"

namespace dprun {
namespace {

class CpuSgdUpdate final : public SgdUpdateKernel {
 public:
  void update(ExecutionContext*, const SgdOptions& o, bool first, Tensor& parameter,
              const Tensor& gradient, Tensor& momentum_buffer, int64_t begin,
              int64_t end) const override {
    visit_dtype_among<float, double>(parameter.dtype(), [&](auto tag) {
      using T = decltype(tag);
      T* p = parameter.data<T>() + begin;
      const T* g = gradient.data<T>() + begin;
      const int64_t n = end - begin;
      math::with_sgd_update<T>(o.lr, o.momentum, o.dampening, o.weight_decay, o.nesterov, first,
                               [&](auto op) {
                                 if constexpr (decltype(op)::kUsesMomentum) {
                                   T* buf = momentum_buffer.data<T>() + begin;
                                   for (int64_t i = 0; i < n; ++i) p[i] = op(p[i], g[i], buf[i]);
                                 } else {
                                   T unused{};
                                   for (int64_t i = 0; i < n; ++i) p[i] = op(p[i], g[i], unused);
                                 }
                               });
    });
  }
};

class CpuAdamUpdate final : public AdamUpdateKernel {
 public:
  void update(ExecutionContext*, const AdamOptions& o, int64_t step, Tensor& parameter,
              const Tensor& gradient, Tensor& exp_avg, Tensor& exp_avg_sq, int64_t begin,
              int64_t end) const override {
    visit_dtype_among<float, double>(parameter.dtype(), [&](auto tag) {
      using T = decltype(tag);
      T* p = parameter.data<T>() + begin;
      const T* g = gradient.data<T>() + begin;
      T* m = exp_avg.data<T>() + begin;
      T* v = exp_avg_sq.data<T>() + begin;
      const int64_t n = end - begin;
      math::with_adam_update<T>(o.lr, o.beta1, o.beta2, o.eps, o.weight_decay,
                                o.decoupled_weight_decay, step, [&](auto op) {
                                  for (int64_t i = 0; i < n; ++i) p[i] = op(p[i], g[i], m[i], v[i]);
                                });
    });
  }
};

class CpuScaleGradient final : public GradientScaleKernel {
 public:
  void scale(ExecutionContext*, double factor, Tensor& gradient, Tensor& found_inf) const override {
    bool found = false;
    visit_dtype_among<float, double>(gradient.dtype(), [&](auto tag) {
      using T = decltype(tag);
      T* g = gradient.data<T>();
      const T by = static_cast<T>(factor);
      const int64_t n = gradient.numel();
      bool finite = true;  // one flag for the whole loop, so that it vectorises
      for (int64_t i = 0; i < n; ++i) {
        finite &= std::isfinite(g[i]);
        g[i] *= by;
      }
      found = !finite;
    });
    if (found) found_inf.data<float>()[0] = 1.0f;
  }
};

class CpuGradientNorm final : public GradientNormKernel {
 public:
  void norm(ExecutionContext*, const Tensor& gradient, bool infinity, Tensor& out,
            int64_t slot) const override {
    double result = 0;
    visit_dtype_among<float, double>(gradient.dtype(), [&](auto tag) {
      using T = decltype(tag);
      const T* g = gradient.data<T>();
      const int64_t n = gradient.numel();
      if (infinity) {
        for (int64_t i = 0; i < n; ++i) {
          const double a = std::fabs(static_cast<double>(g[i]));
          result = std::isnan(a) || a > result ? a : result;  // a NaN wins, and stays
          if (std::isnan(result)) break;
        }
      } else {
        for (int64_t i = 0; i < n; ++i) result += static_cast<double>(g[i]) * g[i];
      }
    });
    out.data<double>()[slot] = result;
  }
};

class CpuAddGradient final : public GradientAddKernel {
 public:
  void add(ExecutionContext*, Tensor& sum, const Tensor& more) const override {
    visit_dtype_among<float, double>(sum.dtype(), [&](auto tag) {
      using T = decltype(tag);
      T* s = sum.data<T>();
      const T* m = more.data<T>();
      const int64_t n = sum.numel();
      for (int64_t i = 0; i < n; ++i) s[i] += m[i];
    });
  }
};

DPRUN_REGISTER_KERNEL({.domain = kDprunDomain,
                       .op_type = kSgdUpdateOp,
                       .dtypes = kFloatTypes,
                       .factory = make_update_kernel<CpuSgdUpdate>});
DPRUN_REGISTER_KERNEL({.domain = kDprunDomain,
                       .op_type = kAdamUpdateOp,
                       .dtypes = kFloatTypes,
                       .factory = make_update_kernel<CpuAdamUpdate>});
DPRUN_REGISTER_KERNEL({.domain = kDprunDomain,
                       .op_type = kScaleGradientOp,
                       .dtypes = kFloatTypes,
                       .factory = make_update_kernel<CpuScaleGradient>});
DPRUN_REGISTER_KERNEL({.domain = kDprunDomain,
                       .op_type = kGradientNormOp,
                       .dtypes = kFloatTypes,
                       .factory = make_update_kernel<CpuGradientNorm>});
DPRUN_REGISTER_KERNEL({.domain = kDprunDomain,
                       .op_type = kAddGradientOp,
                       .dtypes = kFloatTypes,
                       .factory = make_update_kernel<CpuAddGradient>});

}  // namespace
}  // namespace dprun
