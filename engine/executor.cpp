#include "engine/executor.h"

#include <algorithm>
#include <optional>

#include "engine/backend.h"
#include "engine/random_seed.h"
#include "engine/stream_order.h"
#include "engine/wait_on_unwind.h"

namespace dprun {

void check_input(const ValueInfo& info, const Tensor& tensor) {
  DPRUN_CHECK(tensor.defined(), "input '", info.name, "' is missing");
  const TensorType& type = info.type;
  if (type.dtype != DType::Undefined && tensor.dtype() != type.dtype)
    fail("input '", info.name, "' expects dtype ", dtype_name(type.dtype), " but got ",
         dtype_name(tensor.dtype()));
  if (!type.shape) return;
  const SymbolicShape& declared = *type.shape;
  bool ok = static_cast<int64_t>(declared.size()) == tensor.rank();
  for (size_t d = 0; ok && d < declared.size(); ++d)
    ok = !declared[d].is_known() || declared[d].value == tensor.shape()[d];
  if (!ok)
    fail("input '", info.name, "' expects shape ", shape_to_string(declared), " but got ",
         shape_to_string(tensor.shape()));
}

namespace {

// Whether the step hands input `slot` to its kernel wherever it lives.
bool in_place(const PlanStep& step, size_t slot) {
  return slot < step.inputs_in_place.size() && step.inputs_in_place[slot];
}

// The host side of a run off the CPU: nodes without a kernel on the run's device run their
// CPU kernel on copies of their inputs, and their outputs are copied back; shape arithmetic
// runs its CPU kernel on values kept on the host, and keeps its outputs there. Copies from the
// device are ordered after the kernels queued before them (the run's stream is the thread's
// current stream) and complete before the host reads them.
class HostFallback {
 public:
  explicit HostFallback(int threads) : threads_(threads) {}

  /// Replaces every input by a host copy (kept until the next call): the plan's copy of a
  /// constant input, the value itself where it is on the host already or the kernel reads only
  /// its dims. Sequences are made and read by host kernels only, so they are on the host.
  void stage_inputs(const PlanStep& step, std::vector<const Tensor*>& inputs) {
    staged_.clear();
    staged_.reserve(inputs.size());  // the pointers below must stay valid
    for (size_t slot = 0; slot < inputs.size(); ++slot) {
      const Tensor*& t = inputs[slot];
      if (!t || in_place(step, slot)) continue;
      if (auto c = step.host_constants.find(slot); c != step.host_constants.end()) {
        t = &c->second;
        continue;
      }
      if (t->device().type == DeviceType::CPU) continue;
      staged_.push_back(t->to(Device::cpu()));
      t = &staged_.back();
    }
  }

  /// The host execution context, made on first use.
  ExecutionContext& context() {
    if (!context_)
      context_ =
          backend_for(Device::cpu()).create_execution_context(Device::cpu(), {.threads = threads_});
    return *context_;
  }

  /// Moves the node's tensor outputs to `device`; strings and sequences stay on the host.
  void return_outputs(Device device, std::vector<Tensor>& outputs) const {
    for (Tensor& t : outputs)
      if (t.defined()) t = t.to_unless_string(device);
  }

 private:
  int threads_;
  std::vector<Tensor> staged_;
  std::unique_ptr<ExecutionContext> context_;
};

// Hands a device step the plan's host copies of the constants its kernel reads on the host.
void use_host_constants(const PlanStep& step, std::vector<const Tensor*>& inputs) {
  for (const auto& [slot, value] : step.host_constants)
    if (slot < inputs.size() && inputs[slot] != nullptr) inputs[slot] = &value;
}

// Device copies of the values a device step reads that are on the host (shape arithmetic's
// results), for the slots whose kernel does not read them there; kept until the next call.
class DeviceStaging {
 public:
  void stage_inputs(const PlanStep& step, Device device, std::vector<const Tensor*>& inputs) {
    staged_.clear();
    staged_.reserve(inputs.size());  // the pointers below must stay valid
    for (size_t slot = 0; slot < inputs.size(); ++slot) {
      const Tensor*& t = inputs[slot];
      if (!t || in_place(step, slot) || t->device().type != DeviceType::CPU ||
          t->dtype() == DType::String)
        continue;
      staged_.push_back(t->to(device));
      t = &staged_.back();
    }
  }

 private:
  std::vector<Tensor> staged_;
};

// Whether the step runs on the host: a node without a kernel on the plan's device, or one
// whose device kernel does not take the dtype this run feeds it (PlanStep::host_kernel).
bool runs_on_host(const PlanStep& step, DeviceType plan_device,
                  const std::vector<const Tensor*>& inputs) {
  if (step.kernel_device != plan_device) return true;
  if (!step.host_kernel) return false;
  const Tensor* t = inputs[static_cast<size_t>(step.dtype_input)];
  return t && std::find(step.device_dtypes.begin(), step.device_dtypes.end(), t->dtype()) ==
                  step.device_dtypes.end();
}

// Errors carry the node: the message of what `fn` throws for it (its kernel, its inputs'
// copies) is prefixed with the node's description unless it starts with it already.
template <class F>
void for_node(const Node& node, F&& fn) {
  try {
    fn();
  } catch (const Error& e) {
    std::string what = e.what();
    if (what.rfind(node.describe(), 0) == 0) throw;
    node.fail(what);
  } catch (const std::exception& e) {
    node.fail(e.what());
  }
}

// The context the run's kernels execute in: the caller's, or one made here into `own_context`.
ExecutionContext& run_context(Device device, const RunOptions& options,
                              std::unique_ptr<ExecutionContext>& own_context) {
  ExecutionContext* execution = options.context;
  if (execution == nullptr) {
    own_context =
        backend_for(device).create_execution_context(device, {.threads = options.threads});
    execution = own_context.get();
  }
  DPRUN_CHECK(execution->device() == device, "an execution context of ",
              execution->device().to_string(), " cannot run a plan on ", device.to_string());
  return *execution;
}

// The state of one run of a plan: the value table (sequences live beside the tensors, in a
// parallel table indexed by value id) and the scratch buffers every step reuses.
class PlanRun {
 public:
  PlanRun(const Plan& plan, Device device, ExecutionContext& execution, const RunOptions& options)
      : plan_(plan),
        graph_(plan.graph()),
        device_(device),
        execution_(execution),
        options_(options),
        values_(plan.value_count()),
        sequences_(plan.value_count()),
        host_(options.threads),
        off_cpu_(plan.device_type() != DeviceType::CPU) {}

  /// Binds the parameters, then the overridden initializers, then the feeds.
  void bind_inputs(const std::vector<Tensor>& parameters, const std::vector<Value>& feeds,
                   const std::map<std::string, Tensor>& overrides);

  void run_steps() {
    for (const PlanStep& step : plan_.steps()) run_step(step);
  }

  /// In-place state updates write into the parameter's own storage, so a replica that shares
  /// storage with the base updates the base (PyTorch's replica-0 semantics).
  void apply_state_updates(const std::vector<Tensor>& parameters);

  /// Outputs are on the run's device, shape arithmetic's among them.
  void move_outputs_to_device();

  std::vector<Value> results() const;

 private:
  void run_step(const PlanStep& step);
  void collect_inputs(const PlanStep& step);
  void configure(KernelContext& ctx, const PlanStep& step, bool on_host);
  void store_outputs(const PlanStep& step, const Node& node, const KernelContext& ctx);
  void notify_after(const PlanStep& step, const Node& node) const;
  void release_values(const PlanStep& step);

  const Plan& plan_;
  const Graph& graph_;
  Device device_;
  ExecutionContext& execution_;
  const RunOptions& options_;
  std::vector<Tensor> values_;
  std::vector<SequencePtr> sequences_;
  std::vector<const Tensor*> inputs_;
  std::vector<SequencePtr> input_sequences_;
  std::vector<Tensor> outputs_;
  std::vector<SequencePtr> output_sequences_;
  HostFallback host_;
  DeviceStaging to_device_;
  const bool off_cpu_;
};

void PlanRun::bind_inputs(const std::vector<Tensor>& parameters, const std::vector<Value>& feeds,
                          const std::map<std::string, Tensor>& overrides) {
  const auto& param_ids = plan_.parameter_ids();
  for (size_t i = 0; i < param_ids.size(); ++i)
    values_[static_cast<size_t>(param_ids[i])] = parameters[i];
  for (const auto& [name, tensor] : overrides) {
    int id = plan_.value_id(name);
    DPRUN_CHECK(id >= 0 && graph_.initializers.count(name), "'", name,
                "' is not an overridable input of the model");
    values_[static_cast<size_t>(id)] = tensor.to_unless_string(device_);
  }
  const auto& feed_ids = plan_.feed_ids();
  const auto& required = graph_.required_inputs();
  for (size_t i = 0; i < feeds.size(); ++i) {
    const Value& feed = feeds[i];
    size_t id = static_cast<size_t>(feed_ids[i]);
    if (feed.is_sequence()) {
      sequences_[id] = feed.sequence;
      continue;
    }
    // Tensor inputs must be given; non-tensor inputs (declared without dtype) and outer-scope
    // values (past the inputs) may be empty optionals.
    if (i < required.size() &&
        (feed.tensor.defined() || required[i]->type.dtype != DType::Undefined))
      check_input(*required[i], feed.tensor);
    if (feed.tensor.defined()) values_[id] = feed.tensor.to_unless_string(device_);
  }
}

void PlanRun::run_step(const PlanStep& step) {
  const Node& node = graph_.nodes[step.node_index];
  collect_inputs(step);
  const bool on_host = runs_on_host(step, plan_.device_type(), inputs_);
  const OpKernel& kernel = on_host && step.host_kernel ? *step.host_kernel : *step.kernel;
  for_node(node, [&] {
    if (on_host) {
      host_.stage_inputs(step, inputs_);
    } else if (off_cpu_) {
      use_host_constants(step, inputs_);
      to_device_.stage_inputs(step, device_, inputs_);
    }
  });
  outputs_.assign(step.outputs.size(), Tensor());
  output_sequences_.assign(step.outputs.size(), nullptr);
  KernelContext ctx(node, on_host ? host_.context() : execution_, inputs_, outputs_);
  configure(ctx, step, on_host);
  for (const auto& obs : options_.observers)
    if (obs.before) obs.before(node, device_, inputs_);
  for_node(node, [&] { kernel.compute(ctx); });
  if (on_host && !step.shape_arithmetic) host_.return_outputs(device_, outputs_);
  store_outputs(step, node, ctx);
  if (!options_.observers.empty()) notify_after(step, node);
  release_values(step);
}

// The step's input tensors (nullptr where omitted or empty) and sequences.
void PlanRun::collect_inputs(const PlanStep& step) {
  inputs_.clear();
  input_sequences_.clear();
  for (int id : step.inputs) {
    const Tensor* t = id >= 0 ? &values_[static_cast<size_t>(id)] : nullptr;
    inputs_.push_back(t && t->defined() ? t : nullptr);
    input_sequences_.push_back(id >= 0 ? sequences_[static_cast<size_t>(id)] : nullptr);
  }
}

// The run's settings for the step's kernel: its wanted outputs, the inputs it may write over
// (on the run's device only), the replica, its random seed and the sequences.
void PlanRun::configure(KernelContext& ctx, const PlanStep& step, bool on_host) {
  ctx.set_wanted(step.outputs_wanted);
  if (!on_host) ctx.set_released_inputs(&step.inputs_released);
  ctx.set_parameters_version(options_.parameters_version);
  ctx.set_replica(options_.replica_group, options_.replica_index);
  if (options_.random_seed)
    ctx.set_random_seed(derive_seed(*options_.random_seed, step.node_index));
  ctx.bind_sequences(input_sequences_, output_sequences_);
}

// Moves the kernel's outputs into the value table; a wanted output must have a value.
void PlanRun::store_outputs(const PlanStep& step, const Node& node, const KernelContext& ctx) {
  for (size_t o = 0; o < step.outputs.size(); ++o) {
    if (step.outputs[o] < 0) continue;
    if (!outputs_[o].defined() && !output_sequences_[o] && !ctx.output_is_none(o) &&
        step.outputs_wanted[o])
      node.fail("kernel produced no value for output '", node.outputs[o], "'");
    values_[static_cast<size_t>(step.outputs[o])] = std::move(outputs_[o]);
    sequences_[static_cast<size_t>(step.outputs[o])] = std::move(output_sequences_[o]);
  }
}

// The observers' `after` callbacks, shown the step's outputs as stored.
void PlanRun::notify_after(const PlanStep& step, const Node& node) const {
  std::vector<Tensor> produced;
  for (int id : step.outputs)
    produced.push_back(id >= 0 ? values_[static_cast<size_t>(id)] : Tensor());
  for (const auto& obs : options_.observers)
    if (obs.after) obs.after(node, device_, produced);
}

// Drops the values no later step reads.
void PlanRun::release_values(const PlanStep& step) {
  for (int id : step.release_after) {
    values_[static_cast<size_t>(id)] = Tensor();
    sequences_[static_cast<size_t>(id)] = nullptr;
  }
}

void PlanRun::apply_state_updates(const std::vector<Tensor>& parameters) {
  const auto& param_ids = plan_.parameter_ids();
  for (const auto& [value, param] : graph_.state_updates) {
    int vid = plan_.value_id(value), pid = plan_.value_id(param);
    if (vid < 0 || pid < 0 || !values_[static_cast<size_t>(vid)].defined()) continue;
    for (size_t i = 0; i < param_ids.size(); ++i)
      if (param_ids[i] == pid) {
        Tensor target = parameters[i];  // shares the parameter's storage
        target.copy_from(values_[static_cast<size_t>(vid)]);
      }
  }
}

void PlanRun::move_outputs_to_device() {
  if (off_cpu_)
    for (int id : plan_.output_ids()) {
      Tensor& out = values_[static_cast<size_t>(id)];
      if (out.defined() && out.device().type == DeviceType::CPU)
        out = out.to_unless_string(device_);
    }
}

std::vector<Value> PlanRun::results() const {
  std::vector<Value> results;
  for (int id : plan_.output_ids())
    results.push_back({values_[static_cast<size_t>(id)], sequences_[static_cast<size_t>(id)]});
  return results;
}

}  // namespace

std::vector<Value> execute_plan_values(const Plan& plan, Device device,
                                       const std::vector<Tensor>& parameters,
                                       const std::vector<Value>& feeds,
                                       const std::map<std::string, Tensor>& overrides,
                                       const RunOptions& options) {
  DPRUN_CHECK(device.type == plan.device_type(), "plan compiled for ",
              device_type_name(plan.device_type()), " cannot run on ", device.to_string());
  const auto& feed_ids = plan.feed_ids();
  DPRUN_CHECK(feeds.size() == feed_ids.size(), "the model takes ", feed_ids.size(), " input",
              feed_ids.size() == 1 ? "" : "s", " but ", feeds.size(), " were given");
  std::unique_ptr<ExecutionContext> own_context;
  ExecutionContext& execution = run_context(device, options, own_context);
  std::optional<WaitOnUnwind> wait_if_failed;  // a caller's context is the caller's to wait for
  if (own_context) wait_if_failed.emplace(*own_context);

  // The run's stream waits for the events of the tensors it is given and hands them on, with its
  // outputs, under one event of its own at its end (engine/stream_order.h): no host wait ends
  // it. Its released buffers were freed on its own stream, whose later work is ordered after.
  RunOrder order(device);
  std::vector<const Tensor*> given;
  if (order.active()) {
    for (const Tensor& p : parameters) given.push_back(&p);
    for (const Value& feed : feeds) given.push_back(&feed.tensor);
    for (const auto& [name, tensor] : overrides) given.push_back(&tensor);
    order.begin(given);
  }
  PlanRun run(plan, device, execution, options);
  run.bind_inputs(parameters, feeds, overrides);
  run.run_steps();
  run.apply_state_updates(parameters);
  run.move_outputs_to_device();
  std::vector<Value> results = run.results();
  if (order.active()) {
    for (const Value& out : results) given.push_back(&out.tensor);
    order.end(given);
  }
  return results;
}

std::vector<Tensor> run_plan_steps(const Plan& plan, ExecutionContext& execution,
                                   const std::vector<Tensor>& parameters,
                                   const std::vector<Tensor>& feeds, const RunOptions& options) {
  std::vector<Value> values;
  values.reserve(feeds.size());
  for (const Tensor& t : feeds) values.push_back({t, nullptr});
  PlanRun run(plan, execution.device(), execution, options);
  run.bind_inputs(parameters, values, {});
  run.run_steps();
  run.apply_state_updates(parameters);
  run.move_outputs_to_device();
  std::vector<Tensor> results;
  for (Value& out : run.results()) results.push_back(std::move(out.tensor));
  return results;
}

std::vector<Tensor> execute_plan(const Plan& plan, Device device,
                                 const std::vector<Tensor>& parameters,
                                 const std::vector<Tensor>& feeds,
                                 const std::map<std::string, Tensor>& overrides,
                                 const RunOptions& options) {
  std::vector<Value> values;
  values.reserve(feeds.size());
  for (const Tensor& t : feeds) values.push_back({t, nullptr});
  std::vector<Value> outputs =
      execute_plan_values(plan, device, parameters, values, overrides, options);
  std::vector<Tensor> results;
  const auto& declared = plan.graph().outputs;
  for (size_t o = 0; o < outputs.size(); ++o) {
    if (outputs[o].is_sequence())
      fail("graph output '", declared[o].name,
           "' is a sequence; returning sequences from a model is not supported");
    results.push_back(std::move(outputs[o].tensor));
  }
  return results;
}

}  // namespace dprun
