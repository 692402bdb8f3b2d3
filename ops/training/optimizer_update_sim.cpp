#include "ops/training/optimizer_update_sim.h"

#include <string>
#include <vector>

#include "engine/backends/sim/sim_memory.h"
#include "engine/training/optimizer_update.h"

namespace dprun {

namespace {

// Books an update kernel's work on the parameter's device: it reads the parameter, the gradient
// and the state, and writes the parameter and the state.
void book_update(const Tensor& parameter, const Tensor& gradient,
                 const std::vector<const Tensor*>& updated, const std::string& what) {
  const Device device = parameter.device();
  SimWork work(device, what + " on " + device.to_string());
  work.reads(device, gradient.raw_data());
  for (const Tensor* t : updated)
    if (t->defined()) work.writes(device, t->raw_data());
}

class SimSgdUpdate final : public SgdUpdateKernel {
 public:
  explicit SimSgdUpdate(std::unique_ptr<SgdUpdateKernel> host) : host_(std::move(host)) {}
  void update(ExecutionContext*, const SgdOptions& options, bool first, Tensor& parameter,
              const Tensor& gradient, Tensor& momentum_buffer, int64_t begin,
              int64_t end) const override {
    SimAccess access(parameter.device(),
                     data_on(parameter.device(), {&parameter, &gradient, &momentum_buffer}));
    book_update(parameter, gradient, {&parameter, &momentum_buffer}, "an SGD update");
    host_->update(nullptr, options, first, parameter, gradient, momentum_buffer, begin, end);
  }

 private:
  std::unique_ptr<SgdUpdateKernel> host_;
};

class SimAdamUpdate final : public AdamUpdateKernel {
 public:
  explicit SimAdamUpdate(std::unique_ptr<AdamUpdateKernel> host) : host_(std::move(host)) {}
  void update(ExecutionContext*, const AdamOptions& options, int64_t step, Tensor& parameter,
              const Tensor& gradient, Tensor& exp_avg, Tensor& exp_avg_sq, int64_t begin,
              int64_t end) const override {
    SimAccess access(parameter.device(),
                     data_on(parameter.device(), {&parameter, &gradient, &exp_avg, &exp_avg_sq}));
    book_update(parameter, gradient, {&parameter, &exp_avg, &exp_avg_sq}, "an Adam update");
    host_->update(nullptr, options, step, parameter, gradient, exp_avg, exp_avg_sq, begin, end);
  }

 private:
  std::unique_ptr<AdamUpdateKernel> host_;
};

class SimScaleGradient final : public GradientScaleKernel {
 public:
  explicit SimScaleGradient(std::unique_ptr<GradientScaleKernel> host) : host_(std::move(host)) {}
  void scale(ExecutionContext*, double factor, Tensor& gradient, Tensor& found_inf) const override {
    SimAccess access(gradient.device(), data_on(gradient.device(), {&gradient, &found_inf}));
    book_update(gradient, gradient, {&gradient, &found_inf}, "a gradient scale");
    host_->scale(nullptr, factor, gradient, found_inf);
  }

 private:
  std::unique_ptr<GradientScaleKernel> host_;
};

class SimGradientNorm final : public GradientNormKernel {
 public:
  explicit SimGradientNorm(std::unique_ptr<GradientNormKernel> host) : host_(std::move(host)) {}
  void norm(ExecutionContext*, const Tensor& gradient, bool infinity, Tensor& out,
            int64_t slot) const override {
    SimAccess access(gradient.device(), data_on(gradient.device(), {&gradient, &out}));
    book_update(gradient, gradient, {&out}, "a gradient norm");
    host_->norm(nullptr, gradient, infinity, out, slot);
  }

 private:
  std::unique_ptr<GradientNormKernel> host_;
};

class SimAddGradient final : public GradientAddKernel {
 public:
  explicit SimAddGradient(std::unique_ptr<GradientAddKernel> host) : host_(std::move(host)) {}
  void add(ExecutionContext*, Tensor& sum, const Tensor& more) const override {
    SimAccess access(sum.device(), data_on(sum.device(), {&sum, &more}));
    book_update(sum, more, {&sum}, "a gradient sum");
    host_->add(nullptr, sum, more);
  }

 private:
  std::unique_ptr<GradientAddKernel> host_;
};

// `kernel` as a K, taking ownership, or nullptr leaving it alone.
template <class K>
std::unique_ptr<K> take_as(std::unique_ptr<OpKernel>& kernel) {
  if (dynamic_cast<K*>(kernel.get()) == nullptr) return nullptr;
  return std::unique_ptr<K>(static_cast<K*>(kernel.release()));
}

}  // namespace

std::unique_ptr<OpKernel> sim_update_kernel(std::unique_ptr<OpKernel>& host_kernel) {
  if (auto sgd = take_as<SgdUpdateKernel>(host_kernel))
    return std::make_unique<SimSgdUpdate>(std::move(sgd));
  if (auto adam = take_as<AdamUpdateKernel>(host_kernel))
    return std::make_unique<SimAdamUpdate>(std::move(adam));
  if (auto scale = take_as<GradientScaleKernel>(host_kernel))
    return std::make_unique<SimScaleGradient>(std::move(scale));
  if (auto norm = take_as<GradientNormKernel>(host_kernel))
    return std::make_unique<SimGradientNorm>(std::move(norm));
  if (auto add = take_as<GradientAddKernel>(host_kernel))
    return std::make_unique<SimAddGradient>(std::move(add));
  return nullptr;
}

}  // namespace dprun
