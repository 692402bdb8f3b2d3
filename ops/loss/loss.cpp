// NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss.
//
// Both take scores of shape [N, C] or [N, C, d1, ..., dk] and class targets of shape [N] or
// [N, d1, ..., dk]. The per-element loss is -x[n, target, d] * weight[target]; elements whose
// target equals ignore_index contribute 0 and carry weight 0. "mean" divides the weighted sum
// by the sum of the weights that were used (the count of non-ignored elements when no weight
// is given). SoftmaxCrossEntropyLoss applies LogSoftmax over the class axis first and can
// return those log-probabilities as a second output.
#include <cmath>
#include <limits>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "engine/op_facts.h"
#include "ops/common/reduce_common.h"
#include "ops/loss/loss_attributes.h"
#include "ops/softmax/log_softmax.h"

namespace dprun {
namespace {

/// The NLL computation on log-probabilities `lp` laid out [N, C, D]; writes output 0.
template <class T>
void nll_core(KernelContext& ctx, const LossAttrs& attrs, const T* lp, const Tensor& target,
              const Tensor* weight, int64_t n, int64_t c, int64_t d) {
  using C = compute_t<T>;
  const std::vector<int64_t> tgt = read_int_list(ctx, target, "target");
  const T* w = weight ? weight->data<T>() : nullptr;
  const int64_t total = n * d;
  std::vector<double> loss(static_cast<size_t>(total)), wt(static_cast<size_t>(total));
  for (int64_t i = 0; i < total; ++i) {
    const int64_t t = tgt[static_cast<size_t>(i)];
    if (attrs.ignore_index && t == *attrs.ignore_index) {
      loss[static_cast<size_t>(i)] = 0;
      wt[static_cast<size_t>(i)] = 0;
      continue;
    }
    if (t < 0 || t >= c) ctx.fail("target value ", t, " is outside [0, ", c, ")");
    const int64_t ni = i / d, di = i % d;
    const double wv = w ? static_cast<double>(load_as<C>(w[t])) : 1.0;
    loss[static_cast<size_t>(i)] = -static_cast<double>(load_as<C>(lp[(ni * c + t) * d + di])) * wv;
    wt[static_cast<size_t>(i)] = wv;
  }
  if (attrs.reduction == Reduction::None) {
    Tensor& out = ctx.allocate_output(0, target.shape(), dtype_of<T>());
    T* o = out.data<T>();
    for (int64_t i = 0; i < total; ++i) o[i] = store_as<T>(static_cast<C>(loss[i]));
    return;
  }
  double sum = 0, wsum = 0;
  for (int64_t i = 0; i < total; ++i) {
    sum += loss[static_cast<size_t>(i)];
    wsum += wt[static_cast<size_t>(i)];
  }
  double value = attrs.reduction == Reduction::Sum ? sum : sum / wsum;
  Tensor& out = ctx.allocate_output(0, {}, dtype_of<T>());
  out.data<T>()[0] = store_as<T>(static_cast<C>(value));
}

template <class F>
void visit_loss_dtype(const KernelContext& ctx, DType t, F&& f) {
  visit_floating_dtype(ctx, t, std::forward<F>(f), "unsupported scores dtype ", dtype_name(t));
}

class NllLossKernel : public OpKernel {
 public:
  explicit NllLossKernel(const KernelInfo& info) : attrs_(info.node) {}

  void compute(KernelContext& ctx) const override {
    const Tensor& x = ctx.input(0);
    const Tensor& target = ctx.input(1);
    const Tensor* weight = ctx.optional_input(2);
    int64_t n, c, d;
    loss_dims(ctx, x, target, weight, n, c, d);
    visit_loss_dtype(ctx, x.dtype(), [&](auto tag) {
      using T = decltype(tag);
      nll_core<T>(ctx, attrs_, x.data<T>(), target, weight, n, c, d);
    });
  }

 private:
  LossAttrs attrs_;
};

class SoftmaxCrossEntropyKernel : public OpKernel {
 public:
  explicit SoftmaxCrossEntropyKernel(const KernelInfo& info) : attrs_(info.node) {}

  void compute(KernelContext& ctx) const override {
    const Tensor& x = ctx.input(0);
    const Tensor& target = ctx.input(1);
    const Tensor* weight = ctx.optional_input(2);
    int64_t n, c, d;
    loss_dims(ctx, x, target, weight, n, c, d);
    visit_loss_dtype(ctx, x.dtype(), [&](auto tag) {
      using T = decltype(tag);
      // Log-probabilities go straight to output 1 when it is wanted.
      Tensor lp_t = ctx.output_wanted(1) ? ctx.allocate_output(1, x.shape(), x.dtype())
                                         : Tensor::empty(x.shape(), x.dtype());
      T* lp = lp_t.data<T>();
      log_softmax<T>(ctx.execution(), x.data<T>(), lp, n, c, d);
      nll_core<T>(ctx, attrs_, lp, target, weight, n, c, d);
    });
  }

 private:
  LossAttrs attrs_;
};

const std::vector<DType> kLossTypes = {DType::Float32, DType::Float64, DType::Float16,
                                       DType::BFloat16};

DPRUN_REGISTER_KERNEL({.op_type = "NegativeLogLikelihoodLoss",
                       .since = 12,
                       .dtypes = kLossTypes,
                       .factory = make_kernel<NllLossKernel>});
DPRUN_REGISTER_KERNEL({.op_type = "SoftmaxCrossEntropyLoss",
                       .since = 12,
                       .dtypes = kLossTypes,
                       .factory = make_kernel<SoftmaxCrossEntropyKernel>});

}  // namespace
}  // namespace dprun

// The ops' facts (engine/op_facts.h): output types, shapes, 16-bit and layout policy.
namespace dprun {
namespace {
DPRUN_REGISTER_OP_FACTS({.op_type = "NegativeLogLikelihoodLoss"});
DPRUN_REGISTER_OP_FACTS({.op_type = "SoftmaxCrossEntropyLoss"});

}  // namespace
}  // namespace dprun
