#include "engine/autograd/optimizer.h"

#include <cmath>
#include <map>
#include <utility>

#include "engine/error.h"
#include "engine/parallel/run_in_parts.h"

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
    });
  });
}

void Optimizer::update_on_devices(const std::vector<Tensor>& gradients) {
  // The parameters normally all live on one GPU (device_ids[0]); with several, one after the
  // other keeps each context current while its updates are queued.
  for_each_memory(parameters_, [&](Device memory, ExecutionContext* execution,
                                   const std::vector<size_t>& indices) {
    if (memory.type == DeviceType::CPU) return;  // the host loops update these
    for (size_t i : indices)
      update(i, execution, parameters_[i], gradients[i], 0, parameters_[i].numel());
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
