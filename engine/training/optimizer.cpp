#include "engine/training/optimizer.h"

#include <bit>
#include <cmath>
#include <limits>
#include <map>
#include <utility>

#include "engine/error.h"
#include "engine/parallel/run_in_parts.h"
#include "engine/stream_order.h"

namespace dprun {

namespace {

// Below this many elements in all, one thread updates them all: a hand-off to another worker
// costs about as much as updating this many.
constexpr int64_t kMinParallelElements = 1 << 15;

void check_float(const Tensor& t, size_t i) {
  DPRUN_CHECK(t.dtype() == DType::Float32 || t.dtype() == DType::Float64, "optimizer: parameter ",
              i, " is ", t.describe(), "; only float32 and float64 parameters can be trained");
}

bool in_host_memory(const Tensor& t) {
  return t.device().type == DeviceType::CPU;
}

// Whether any of the n values at `v` is a NaN or an infinity: an all-ones exponent, tested on
// the bits so that the loop has no branch and vectorizes (a pass at memory speed).
template <class T, class Bits>
bool any_non_finite(const T* v, int64_t n) {
  constexpr Bits exponent = std::bit_cast<Bits>(std::numeric_limits<T>::infinity());
  Bits found = 0;
  for (int64_t k = 0; k < n; ++k) found |= (std::bit_cast<Bits>(v[k]) & exponent) == exponent;
  return found != 0;
}

std::vector<Tensor> zeros_like_all(const std::vector<Tensor>& params) {
  std::vector<Tensor> out;
  for (const Tensor& p : params) out.push_back(Tensor::zeros(p.shape(), p.dtype(), p.device()));
  return out;
}

}  // namespace

Optimizer::Optimizer(std::vector<Tensor> parameters)
    : parameters_(std::move(parameters)), counts_(element_counts(parameters_)) {
  for (size_t i = 0; i < parameters_.size(); ++i) {
    check_float(parameters_[i], i);
    if (!in_host_memory(parameters_[i])) {
      counts_[i] = 0;  // updated on its device, not by the host loops
      on_devices_ = true;
    }
  }
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
  first_non_finite_ = kNone;
  device_checks_pending_ = false;
  // Each gradient where its parameter's update reads it: host memory (any CPU device), or the
  // parameter's GPU.
  std::vector<Tensor> local;
  for (size_t i = 0; i < gradients.size(); ++i) {
    const Tensor& g = gradients[i];
    const Tensor& p = parameters_[i];
    if (in_host_memory(p))
      local.push_back(in_host_memory(g) ? g : g.to(Device::cpu()));
    else
      local.push_back(g.device() == p.device() ? g : g.to(p.device()));
  }
  if (on_devices_) update_on_devices(local);
  run_in_parts(workers, total_elements_, kMinParallelElements, [&](int64_t begin, int64_t end) {
    for_each_piece(counts_, begin, end, [&](size_t i, int64_t first, int64_t last) {
      update(i, nullptr, parameters_[i], local[i], first, last);
      check_finite_range(i, first, last);
    });
  });
}

std::optional<size_t> Optimizer::non_finite_parameter() const {
  if (device_checks_pending_) {  // the devices' values: each copy waits for the check's event
    for (const auto& [memory, check] : device_checks_) {
      const Tensor host = check.max_abs.to(Device::cpu());
      for (size_t k = 0; k < check.indices.size(); ++k)
        if (!std::isfinite(host.data<double>()[k]) && check.indices[k] < first_non_finite_)
          first_non_finite_ = check.indices[k];
    }
    device_checks_pending_ = false;
  }
  const size_t i = first_non_finite_.load();
  if (i == kNone) return std::nullopt;
  return i;
}

void Optimizer::check_finite_range(size_t i, int64_t begin, int64_t end) {
  const Tensor& p = parameters_[i];
  const bool bad = p.dtype() == DType::Float64
                       ? any_non_finite<double, uint64_t>(p.data<double>() + begin, end - begin)
                       : any_non_finite<float, uint32_t>(p.data<float>() + begin, end - begin);
  if (!bad) return;
  size_t seen = first_non_finite_.load();
  while (i < seen && !first_non_finite_.compare_exchange_weak(seen, i)) {
  }
}

void Optimizer::check_finite_on_device(Device memory, ExecutionContext* execution,
                                       const std::vector<size_t>& indices) {
  DeviceCheck& check = device_checks_[memory];
  const auto n = static_cast<int64_t>(indices.size());
  if (!check.max_abs.defined() || check.max_abs.numel() != n)
    check.max_abs = Tensor::empty({n}, DType::Float64, memory);
  check.indices = indices;
  use_on_stream(check.max_abs, memory, StreamWait::Handover);  // the last step's read-back
  for (size_t k = 0; k < indices.size(); ++k) {
    const Tensor& p = parameters_[indices[k]];
    norm_kernels_.get(memory.type, p.dtype())
        .norm(execution, p, true, check.max_abs, static_cast<int64_t>(k));
  }
  hand_over(std::vector<Tensor>{check.max_abs}, memory);
  device_checks_pending_ = true;
}

void Optimizer::update_on_devices(const std::vector<Tensor>& gradients) {
  // The parameters normally all live on one GPU (device_ids[0]); with several, one after the
  // other keeps each context current while its updates are queued.
  std::vector<const std::vector<Tensor>*> with = state_lists();
  with.push_back(&gradients);
  for_each_memory(
      parameters_, with,
      [&](Device memory, ExecutionContext* execution, const std::vector<size_t>& indices) {
        if (memory.type == DeviceType::CPU) return;  // the host loops update these
        for (size_t i : indices)
          update(i, execution, parameters_[i], gradients[i], 0, parameters_[i].numel());
        check_finite_on_device(memory, execution, indices);
      });
}

void Optimizer::update_range(size_t i, const Tensor& gradient, int64_t begin, int64_t end) {
  DPRUN_CHECK(i < parameters_.size(), "optimizer: parameter ", i, " of ", parameters_.size());
  DPRUN_CHECK(in_host_memory(parameters_[i]), "optimizer: update_range needs a parameter in ",
              "host memory, but parameter ", i, " lives on ", parameters_[i].device().to_string());
  DPRUN_CHECK(gradient.shape() == parameters_[i].shape() &&
                  gradient.dtype() == parameters_[i].dtype() && in_host_memory(gradient),
              "optimizer: gradient ", i, " is ", gradient.describe(), " but its parameter is ",
              parameters_[i].describe());
  DPRUN_CHECK(0 <= begin && begin <= end && end <= counts_[i], "optimizer: range [", begin, ", ",
              end, ") of parameter ", i, " with ", counts_[i], " elements");
  update(i, nullptr, parameters_[i], gradient, begin, end);
  check_finite_range(i, begin, end);
}

void Optimizer::exempt_from_weight_decay(const std::vector<bool>& exempt) {
  DPRUN_CHECK(exempt.size() == parameters_.size(), "optimizer: ", exempt.size(),
              " weight-decay exemptions for ", parameters_.size(), " parameters");
  decay_exempt_ = exempt;
}

void Optimizer::set_parameter_lrs(std::vector<std::optional<double>> lrs) {
  DPRUN_CHECK(lrs.empty() || lrs.size() == parameters_.size(), "optimizer: ", lrs.size(),
              " learning rates for ", parameters_.size(), " parameters");
  for (size_t i = 0; i < lrs.size(); ++i)
    DPRUN_CHECK(!lrs[i] || (std::isfinite(*lrs[i]) && *lrs[i] >= 0),
                "optimizer: invalid learning rate ", *lrs[i], " for parameter ", i);
  parameter_lrs_ = std::move(lrs);
}

void Optimizer::load_state(const State& state) {
  DPRUN_CHECK(state.steps >= 0, "optimizer: a state of ", state.steps, " steps");
  std::map<std::string, Tensor> own = buffers();
  for (const auto& [name, value] : state.buffers)
    DPRUN_CHECK(own.count(name), "optimizer: the state has '", name,
                "', which this optimizer does not keep");
  for (const auto& [name, buffer] : own) {
    auto it = state.buffers.find(name);
    DPRUN_CHECK(it != state.buffers.end(), "optimizer: the state lacks '", name, "'");
    DPRUN_CHECK(it->second.shape() == buffer.shape() && it->second.dtype() == buffer.dtype(),
                "optimizer: '", name, "' is ", it->second.describe(), " in the state but ",
                buffer.describe(), " here");
  }
  for (auto& [name, buffer] : own) buffer.copy_from(state.buffers.at(name));
  steps_ = state.steps;
}

namespace {

/// `tensors` named "<prefix>.<index>".
void name_each(std::map<std::string, Tensor>& out, const char* prefix,
               const std::vector<Tensor>& tensors) {
  for (size_t i = 0; i < tensors.size(); ++i)
    out[std::string(prefix) + "." + std::to_string(i)] = tensors[i];
}

}  // namespace

Sgd::Sgd(std::vector<Tensor> parameters, SgdOptions options)
    : Optimizer(std::move(parameters)), options_(options) {
  DPRUN_CHECK(options_.lr >= 0, "SGD: invalid learning rate ", options_.lr);
  DPRUN_CHECK(options_.momentum >= 0, "SGD: invalid momentum ", options_.momentum);
  DPRUN_CHECK(options_.weight_decay >= 0, "SGD: invalid weight decay ", options_.weight_decay);
  DPRUN_CHECK(!options_.nesterov || (options_.momentum > 0 && options_.dampening == 0),
              "SGD: Nesterov momentum requires a momentum and zero dampening");
  kernels_ = kernels_for_parameters(kernel_cache_);
  if (options_.momentum != 0) momentum_ = zeros_like_all(this->parameters());
}

void Sgd::update(size_t i, ExecutionContext* execution, Tensor& parameter, const Tensor& gradient,
                 int64_t begin, int64_t end) {
  Tensor no_buffer;
  Tensor& buffer = options_.momentum != 0 ? momentum_[i] : no_buffer;
  kernels_[i]->update(execution, options_for(i, options_), steps() == 1, parameter, gradient,
                      buffer, begin, end);
}

std::map<std::string, Tensor> Sgd::buffers() const {
  std::map<std::string, Tensor> out;
  name_each(out, "momentum_buffer", momentum_);
  return out;
}

Adam::Adam(std::vector<Tensor> parameters, AdamOptions options)
    : Optimizer(std::move(parameters)), options_(options) {
  DPRUN_CHECK(options_.lr >= 0, "Adam: invalid learning rate ", options_.lr);
  DPRUN_CHECK(options_.eps >= 0, "Adam: invalid epsilon ", options_.eps);
  DPRUN_CHECK(options_.beta1 >= 0 && options_.beta1 < 1, "Adam: invalid beta1 ", options_.beta1);
  DPRUN_CHECK(options_.beta2 >= 0 && options_.beta2 < 1, "Adam: invalid beta2 ", options_.beta2);
  DPRUN_CHECK(options_.weight_decay >= 0, "Adam: invalid weight decay ", options_.weight_decay);
  kernels_ = kernels_for_parameters(kernel_cache_);
  exp_avg_ = zeros_like_all(this->parameters());
  exp_avg_sq_ = zeros_like_all(this->parameters());
}

void Adam::update(size_t i, ExecutionContext* execution, Tensor& parameter, const Tensor& gradient,
                  int64_t begin, int64_t end) {
  kernels_[i]->update(execution, options_for(i, options_), steps(), parameter, gradient,
                      exp_avg_[i], exp_avg_sq_[i], begin, end);
}

std::map<std::string, Tensor> Adam::buffers() const {
  std::map<std::string, Tensor> out;
  name_each(out, "exp_avg", exp_avg_);
  name_each(out, "exp_avg_sq", exp_avg_sq_);
  return out;
}

}  // namespace dprun
