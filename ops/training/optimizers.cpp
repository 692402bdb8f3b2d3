// Training optimizers of the ai.onnx.preview.training domain: Adagrad, Momentum, Adam.
// Inputs are R (learning rate scalar), T (update count scalar), then k tensors to optimize, their
// k gradients and the k (or 2k for Adam) state tensors; outputs are the k new tensors followed
// by the new states.
#include <cmath>
#include <string>
#include <vector>

#include "ops/common/reduce_common.h"

namespace dprun {
namespace {

enum class OptKind { Adagrad, Momentum, Adam };

template <OptKind K>
class OptimizerKernel : public OpKernel {
 public:
  static constexpr int64_t kStates = K == OptKind::Adam ? 2 : 1;

  explicit OptimizerKernel(const KernelInfo& info) {
    const Node& node = info.node;
    if constexpr (K == OptKind::Adagrad) {
      decay_ = node.attr_float("decay_factor", 0.f);
      epsilon_ = node.attr_float("epsilon", 1e-6f);
      norm_ = node.attr_float("norm_coefficient", 0.f);
    } else if constexpr (K == OptKind::Momentum) {
      alpha_ = node.attr_float("alpha");
      beta_ = node.attr_float("beta");
      norm_ = node.attr_float("norm_coefficient");
      std::string mode = node.attr_string("mode");
      if (mode == "nesterov")
        nesterov_ = true;
      else if (mode != "standard")
        node.fail("mode must be 'standard' or 'nesterov', got '", mode, "'");
    } else {
      alpha_ = node.attr_float("alpha", 0.9f);
      beta_ = node.attr_float("beta", 0.999f);
      epsilon_ = node.attr_float("epsilon", 1e-6f);
      norm_ = node.attr_float("norm_coefficient", 0.f);
      norm_post_ = node.attr_float("norm_coefficient_post", 0.f);
    }
  }

  void compute(KernelContext& ctx) const override {
    const int64_t n_in = static_cast<int64_t>(ctx.input_count()) - 2;
    if (n_in <= 0 || n_in % (2 + kStates) != 0)
      ctx.fail("expected R, T and ", 2 + kStates, " tensors per optimized input, got ",
               ctx.input_count(), " inputs");
    const int64_t k = n_in / (2 + kStates);
    const double r = ctx.input(0).item_as_double(0);
    const int64_t t = read_int_scalar(ctx, ctx.input(1), "T");
    for (int64_t i = 0; i < k; ++i) {
      const Tensor& x = ctx.input(static_cast<size_t>(2 + i));
      const Tensor& g = ctx.input(static_cast<size_t>(2 + k + i));
      const Tensor& s1 = ctx.input(static_cast<size_t>(2 + 2 * k + i));
      const Tensor* s2 =
          K == OptKind::Adam ? &ctx.input(static_cast<size_t>(2 + 3 * k + i)) : nullptr;
      for (const Tensor* o : {&g, &s1, s2})
        if (o && (o->shape() != x.shape() || o->dtype() != x.dtype()))
          ctx.fail("input ", i, ": ", o->describe(), " does not match ", x.describe());
      visit_numeric_dtype(x.dtype(), [&](auto tag) {
        using T = decltype(tag);
        if constexpr (std::is_floating_point_v<T>) {
          const T* xs = x.data<T>();
          const T* gs = g.data<T>();
          const T* v = s1.data<T>();
          T* xo = ctx.allocate_output(static_cast<size_t>(i), x.shape(), x.dtype()).data<T>();
          T* vo = ctx.allocate_output(static_cast<size_t>(k + i), x.shape(), x.dtype()).data<T>();
          T* ho = nullptr;
          const T* h = nullptr;
          if constexpr (K == OptKind::Adam) {
            h = s2->data<T>();
            ho =
                ctx.allocate_output(static_cast<size_t>(2 * k + i), x.shape(), x.dtype()).data<T>();
          }
          for (int64_t e = 0; e < x.numel(); ++e) {
            const double xv = xs[e];
            const double greg = norm_ * xv + static_cast<double>(gs[e]);
            if constexpr (K == OptKind::Adagrad) {
              const double lr = r / (1 + static_cast<double>(t) * decay_);
              const double hn = static_cast<double>(v[e]) + greg * greg;
              vo[e] = static_cast<T>(hn);
              xo[e] = static_cast<T>(xv - lr * greg / (std::sqrt(hn) + epsilon_));
            } else if constexpr (K == OptKind::Momentum) {
              const double b = t > 0 ? beta_ : 1.0;
              const double vn = alpha_ * static_cast<double>(v[e]) + b * greg;
              vo[e] = static_cast<T>(vn);
              xo[e] = static_cast<T>(nesterov_ ? xv - r * (greg + alpha_ * vn) : xv - r * vn);
            } else {
              const double vn = alpha_ * static_cast<double>(v[e]) + (1 - alpha_) * greg;
              const double hn = beta_ * static_cast<double>(h[e]) + (1 - beta_) * greg * greg;
              double lr = r;
              if (t > 0)
                lr = r * std::sqrt(1 - std::pow(beta_, static_cast<double>(t))) /
                     (1 - std::pow(alpha_, static_cast<double>(t)));
              const double xn = xv - lr * vn / (std::sqrt(hn) + epsilon_);
              vo[e] = static_cast<T>(vn);
              ho[e] = static_cast<T>(hn);
              xo[e] = static_cast<T>((1 - norm_post_) * xn);
            }
          }
        } else {
          ctx.fail("optimized tensors must be floating point, got ", dtype_name(x.dtype()));
        }
      });
    }
  }

 private:
  double alpha_ = 0, beta_ = 0, epsilon_ = 0, decay_ = 0, norm_ = 0, norm_post_ = 0;
  bool nesterov_ = false;
};

DPRUN_REGISTER_KERNEL({.domain = "ai.onnx.preview.training",
                       .op_type = "Adagrad",
                       .since = 1,
                       .dtypes = kFloatTypes,
                       .dtype_input = 2,  // the first X
                       .factory = make_kernel<OptimizerKernel<OptKind::Adagrad>>});
DPRUN_REGISTER_KERNEL({.domain = "ai.onnx.preview.training",
                       .op_type = "Momentum",
                       .since = 1,
                       .dtypes = kFloatTypes,
                       .dtype_input = 2,  // the first X
                       .factory = make_kernel<OptimizerKernel<OptKind::Momentum>>});
DPRUN_REGISTER_KERNEL({.domain = "ai.onnx.preview.training",
                       .op_type = "Adam",
                       .since = 1,
                       .dtypes = kFloatTypes,
                       .dtype_input = 2,  // the first X
                       .factory = make_kernel<OptimizerKernel<OptKind::Adam>>});

}  // namespace
}  // namespace dprun
