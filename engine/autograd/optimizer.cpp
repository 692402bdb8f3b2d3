#include "engine/autograd/optimizer.h"

#include <cmath>

#include "engine/error.h"
#include "engine/parallel/run_in_parts.h"

namespace dprun {

namespace {

// Below this many elements in all, one thread updates them all: a hand-off to another worker
// costs about as much as updating this many.
constexpr int64_t kMinParallelElements = 1 << 15;

void check_host_float(const Tensor& t, size_t i) {
  DPRUN_CHECK(t.dtype() == DType::Float32 || t.dtype() == DType::Float64, "optimizer: parameter ",
              i, " is ", t.describe(), "; only float32 and float64 parameters can be trained");
  DPRUN_CHECK(t.device().type == DeviceType::CPU, "optimizer: parameter ", i, " lives on ",
              t.device().to_string(), "; optimizers update parameters in host memory");
}

// Calls f.template operator()<T>() with T the element type of `t`.
template <class F>
void with_float_type(const Tensor& t, F&& f) {
  if (t.dtype() == DType::Float64)
    f(double{});
  else
    f(float{});
}

// The scalar arguments of torch's tensor ops are cast to the tensor's type before use; these
// loops do the same, one rounding per op, in torch's order. Each combination of settings gets
// its own branch-free loop, so that the compiler vectorises it.
template <class T, bool kDecay, bool kMomentum, bool kFirst, bool kNesterov>
void sgd_loop(T* p, const T* g, T* buf, int64_t n, const SgdOptions& o) {
  const T wd = static_cast<T>(o.weight_decay), m = static_cast<T>(o.momentum);
  const T keep = static_cast<T>(1 - o.dampening), neg_lr = static_cast<T>(-o.lr);
  for (int64_t i = 0; i < n; ++i) {
    T d = g[i];
    if constexpr (kDecay) d = d + wd * p[i];
    if constexpr (kMomentum) {
      T b = kFirst ? d : buf[i] * m + keep * d;
      buf[i] = b;
      d = kNesterov ? d + m * b : b;
    }
    p[i] = p[i] + neg_lr * d;
  }
}

template <class T>
void sgd_update(T* p, const T* g, T* buf, bool first, int64_t n, const SgdOptions& o) {
  auto with_momentum = [&]<bool kDecay>() {
    if (first)
      o.nesterov ? sgd_loop<T, kDecay, true, true, true>(p, g, buf, n, o)
                 : sgd_loop<T, kDecay, true, true, false>(p, g, buf, n, o);
    else
      o.nesterov ? sgd_loop<T, kDecay, true, false, true>(p, g, buf, n, o)
                 : sgd_loop<T, kDecay, true, false, false>(p, g, buf, n, o);
  };
  if (o.momentum == 0)
    o.weight_decay != 0 ? sgd_loop<T, true, false, false, false>(p, g, buf, n, o)
                        : sgd_loop<T, false, false, false, false>(p, g, buf, n, o);
  else if (o.weight_decay != 0)
    with_momentum.template operator()<true>();
  else
    with_momentum.template operator()<false>();
}

template <class T>
void adam_update(T* p, const T* g, T* m, T* v, int64_t n, int64_t step, const AdamOptions& o) {
  if (o.decoupled_weight_decay && o.weight_decay != 0) {
    const T decay = static_cast<T>(1 - o.lr * o.weight_decay);
    for (int64_t i = 0; i < n; ++i) p[i] = p[i] * decay;
  }
  const T l2 = o.decoupled_weight_decay ? T(0) : static_cast<T>(o.weight_decay);
  const T b1 = static_cast<T>(o.beta1), b2 = static_cast<T>(o.beta2);
  const T one_minus_b1 = static_cast<T>(1 - o.beta1), one_minus_b2 = static_cast<T>(1 - o.beta2);
  const double correction1 = 1 - std::pow(o.beta1, static_cast<double>(step));
  const double correction2 = 1 - std::pow(o.beta2, static_cast<double>(step));
  const T neg_step_size = static_cast<T>(-(o.lr / correction1));
  const T correction2_sqrt = static_cast<T>(std::sqrt(correction2));
  const T eps = static_cast<T>(o.eps);
  for (int64_t i = 0; i < n; ++i) {
    T grad = l2 != 0 ? g[i] + l2 * p[i] : g[i];
    m[i] = m[i] * b1 + one_minus_b1 * grad;
    v[i] = v[i] * b2 + one_minus_b2 * (grad * grad);
    T denom = std::sqrt(v[i]) / correction2_sqrt + eps;
    p[i] = p[i] + neg_step_size * (m[i] / denom);
  }
}

std::vector<Tensor> zeros_like_all(const std::vector<Tensor>& params) {
  std::vector<Tensor> out;
  for (const Tensor& p : params) out.push_back(Tensor::zeros(p.shape(), p.dtype(), p.device()));
  return out;
}

}  // namespace

Optimizer::Optimizer(std::vector<Tensor> parameters)
    : parameters_(std::move(parameters)), counts_(element_counts(parameters_)) {
  for (size_t i = 0; i < parameters_.size(); ++i) check_host_float(parameters_[i], i);
  for (int64_t c : counts_) total_elements_ += c;
}

void Optimizer::step(const std::vector<Tensor>& gradients, const std::vector<Device>& workers) {
  DPRUN_CHECK(gradients.size() == parameters_.size(), "optimizer: ", gradients.size(),
              " gradients for ", parameters_.size(), " parameters");
  for (size_t i = 0; i < gradients.size(); ++i)
    DPRUN_CHECK(gradients[i].shape() == parameters_[i].shape() &&
                    gradients[i].dtype() == parameters_[i].dtype(),
                "optimizer: gradient ", i, " is ", gradients[i].describe(),
                " but its parameter is ", parameters_[i].describe());
  ++steps_;
  std::vector<Tensor> host;
  for (const Tensor& g : gradients)
    host.push_back(g.device().type == DeviceType::CPU ? g : g.to(Device::cpu()));
  run_in_parts(workers, total_elements_, kMinParallelElements, [&](int64_t begin, int64_t end) {
    for_each_piece(counts_, begin, end, [&](size_t i, int64_t first, int64_t last) {
      update(i, parameters_[i], host[i], first, last);
    });
  });
}

void Optimizer::update_range(size_t i, const Tensor& gradient, int64_t begin, int64_t end) {
  DPRUN_CHECK(i < parameters_.size(), "optimizer: parameter ", i, " of ", parameters_.size());
  DPRUN_CHECK(gradient.shape() == parameters_[i].shape() &&
                  gradient.dtype() == parameters_[i].dtype() &&
                  gradient.device().type == DeviceType::CPU,
              "optimizer: gradient ", i, " is ", gradient.describe(), " but its parameter is ",
              parameters_[i].describe());
  DPRUN_CHECK(0 <= begin && begin <= end && end <= counts_[i], "optimizer: range [", begin, ", ",
              end, ") of parameter ", i, " with ", counts_[i], " elements");
  update(i, parameters_[i], gradient, begin, end);
}

Sgd::Sgd(std::vector<Tensor> parameters, SgdOptions options)
    : Optimizer(std::move(parameters)), options_(options) {
  DPRUN_CHECK(options_.lr >= 0, "SGD: invalid learning rate ", options_.lr);
  DPRUN_CHECK(options_.momentum >= 0, "SGD: invalid momentum ", options_.momentum);
  DPRUN_CHECK(options_.weight_decay >= 0, "SGD: invalid weight decay ", options_.weight_decay);
  DPRUN_CHECK(!options_.nesterov || (options_.momentum > 0 && options_.dampening == 0),
              "SGD: Nesterov momentum requires a momentum and zero dampening");
  if (options_.momentum != 0) momentum_ = zeros_like_all(this->parameters());
}

void Sgd::update(size_t i, Tensor& parameter, const Tensor& gradient, int64_t begin, int64_t end) {
  with_float_type(parameter, [&](auto tag) {
    using T = decltype(tag);
    T* buf = options_.momentum != 0 ? momentum_[i].data<T>() + begin : nullptr;
    sgd_update(parameter.data<T>() + begin, gradient.data<T>() + begin, buf, steps() == 1,
               end - begin, options_);
  });
}

Adam::Adam(std::vector<Tensor> parameters, AdamOptions options)
    : Optimizer(std::move(parameters)), options_(options) {
  DPRUN_CHECK(options_.lr >= 0, "Adam: invalid learning rate ", options_.lr);
  DPRUN_CHECK(options_.eps >= 0, "Adam: invalid epsilon ", options_.eps);
  DPRUN_CHECK(options_.beta1 >= 0 && options_.beta1 < 1, "Adam: invalid beta1 ", options_.beta1);
  DPRUN_CHECK(options_.beta2 >= 0 && options_.beta2 < 1, "Adam: invalid beta2 ", options_.beta2);
  DPRUN_CHECK(options_.weight_decay >= 0, "Adam: invalid weight decay ", options_.weight_decay);
  exp_avg_ = zeros_like_all(this->parameters());
  exp_avg_sq_ = zeros_like_all(this->parameters());
}

void Adam::update(size_t i, Tensor& parameter, const Tensor& gradient, int64_t begin, int64_t end) {
  with_float_type(parameter, [&](auto tag) {
    using T = decltype(tag);
    adam_update(parameter.data<T>() + begin, gradient.data<T>() + begin,
                exp_avg_[i].data<T>() + begin, exp_avg_sq_[i].data<T>() + begin, end - begin,
                steps(), options_);
  });
}

}  // namespace dprun
