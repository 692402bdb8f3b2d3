#include "engine/executor.h"

#include <algorithm>
#include <optional>

#include "engine/backend.h"
#include "engine/random_seed.h"
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

}  // namespace

std::vector<Value> execute_plan_values(const Plan& plan, Device device,
                                       const std::vector<Tensor>& parameters,
                                       const std::vector<Value>& feeds,
                                       const std::map<std::string, Tensor>& overrides,
                                       const RunOptions& options) {
  const Graph& graph = plan.graph();
  DPRUN_CHECK(device.type == plan.device_type(), "plan compiled for ",
              device_type_name(plan.device_type()), " cannot run on ", device.to_string());
  const auto& feed_ids = plan.feed_ids();
  const auto& required = graph.required_inputs();
  DPRUN_CHECK(feeds.size() == feed_ids.size(), "the model takes ", feed_ids.size(), " input",
              feed_ids.size() == 1 ? "" : "s", " but ", feeds.size(), " were given");
  std::unique_ptr<ExecutionContext> own_context;
  ExecutionContext* execution = options.context;
  if (execution == nullptr) {
    own_context =
        backend_for(device).create_execution_context(device, {.threads = options.threads});
    execution = own_context.get();
  }
  DPRUN_CHECK(execution->device() == device, "an execution context of ",
              execution->device().to_string(), " cannot run a plan on ", device.to_string());
  std::optional<WaitOnUnwind> wait_if_failed;  // a caller's context is the caller's to wait for
  if (own_context) wait_if_failed.emplace(*own_context);

  // Sequences live beside the tensors, in a parallel table indexed by value id.
  std::vector<Tensor> values(plan.value_count());
  std::vector<SequencePtr> sequences(plan.value_count());
  const auto& param_ids = plan.parameter_ids();
  for (size_t i = 0; i < param_ids.size(); ++i)
    values[static_cast<size_t>(param_ids[i])] = parameters[i];
  for (const auto& [name, tensor] : overrides) {
    int id = plan.value_id(name);
    DPRUN_CHECK(id >= 0 && graph.initializers.count(name), "'", name,
                "' is not an overridable input of the model");
    values[static_cast<size_t>(id)] = tensor.to_unless_string(device);
  }
  for (size_t i = 0; i < feeds.size(); ++i) {
    const Value& feed = feeds[i];
    size_t id = static_cast<size_t>(feed_ids[i]);
    if (feed.is_sequence()) {
      sequences[id] = feed.sequence;
      continue;
    }
    // Tensor inputs must be given; non-tensor inputs (declared without dtype) and outer-scope
    // values (past the inputs) may be empty optionals.
    if (i < required.size() &&
        (feed.tensor.defined() || required[i]->type.dtype != DType::Undefined))
      check_input(*required[i], feed.tensor);
    if (feed.tensor.defined()) values[id] = feed.tensor.to_unless_string(device);
  }

  std::vector<const Tensor*> inputs;
  std::vector<SequencePtr> input_sequences;
  std::vector<Tensor> outputs;
  std::vector<SequencePtr> output_sequences;
  HostFallback host(options.threads);
  DeviceStaging to_device;
  const bool off_cpu = plan.device_type() != DeviceType::CPU;
  for (const PlanStep& step : plan.steps()) {
    const Node& node = graph.nodes[step.node_index];
    inputs.clear();
    input_sequences.clear();
    for (int id : step.inputs) {
      const Tensor* t = id >= 0 ? &values[static_cast<size_t>(id)] : nullptr;
      inputs.push_back(t && t->defined() ? t : nullptr);
      input_sequences.push_back(id >= 0 ? sequences[static_cast<size_t>(id)] : nullptr);
    }
    const bool on_host = runs_on_host(step, plan.device_type(), inputs);
    const OpKernel& kernel = on_host && step.host_kernel ? *step.host_kernel : *step.kernel;
    if (on_host) {
      host.stage_inputs(step, inputs);
    } else if (off_cpu) {
      use_host_constants(step, inputs);
      to_device.stage_inputs(step, device, inputs);
    }
    outputs.assign(step.outputs.size(), Tensor());
    output_sequences.assign(step.outputs.size(), nullptr);
    KernelContext ctx(node, on_host ? host.context() : *execution, inputs, outputs);
    ctx.set_wanted(step.outputs_wanted);
    if (!on_host) ctx.set_released_inputs(&step.inputs_released);
    ctx.set_parameters_version(options.parameters_version);
    ctx.set_replica(options.replica_group, options.replica_index);
    if (options.random_seed)
      ctx.set_random_seed(derive_seed(*options.random_seed, step.node_index));
    ctx.bind_sequences(input_sequences, output_sequences);
    for (const auto& obs : options.observers)
      if (obs.before) obs.before(node, device, inputs);
    try {
      kernel.compute(ctx);
    } catch (const Error& e) {
      std::string what = e.what();
      if (what.rfind(node.describe(), 0) == 0) throw;
      node.fail(what);
    } catch (const std::exception& e) {
      node.fail(e.what());
    }
    if (on_host && !step.shape_arithmetic) host.return_outputs(device, outputs);
    for (size_t o = 0; o < step.outputs.size(); ++o) {
      if (step.outputs[o] < 0) continue;
      if (!outputs[o].defined() && !output_sequences[o] && !ctx.output_is_none(o) &&
          step.outputs_wanted[o])
        node.fail("kernel produced no value for output '", node.outputs[o], "'");
      values[static_cast<size_t>(step.outputs[o])] = std::move(outputs[o]);
      sequences[static_cast<size_t>(step.outputs[o])] = std::move(output_sequences[o]);
    }
    if (!options.observers.empty()) {
      std::vector<Tensor> produced;
      for (int id : step.outputs)
        produced.push_back(id >= 0 ? values[static_cast<size_t>(id)] : Tensor());
      for (const auto& obs : options.observers)
        if (obs.after) obs.after(node, device, produced);
    }
    for (int id : step.release_after) {
      values[static_cast<size_t>(id)] = Tensor();
      sequences[static_cast<size_t>(id)] = nullptr;
    }
  }

  // In-place state updates write into the parameter's own storage, so a replica that shares
  // storage with the base updates the base (PyTorch's replica-0 semantics).
  for (const auto& [value, param] : graph.state_updates) {
    int vid = plan.value_id(value), pid = plan.value_id(param);
    if (vid < 0 || pid < 0 || !values[static_cast<size_t>(vid)].defined()) continue;
    for (size_t i = 0; i < param_ids.size(); ++i)
      if (param_ids[i] == pid) {
        Tensor target = parameters[i];  // shares the parameter's storage
        target.copy_from(values[static_cast<size_t>(vid)]);
      }
  }

  // Outputs are on the run's device, shape arithmetic's among them.
  if (off_cpu)
    for (int id : plan.output_ids()) {
      Tensor& out = values[static_cast<size_t>(id)];
      if (out.defined() && out.device().type == DeviceType::CPU) out = out.to_unless_string(device);
    }
  // A context made here ends with the run: its work must be finished before the outputs and
  // the released buffers are handed on.
  if (own_context) own_context->synchronize();
  std::vector<Value> results;
  for (int id : plan.output_ids())
    results.push_back({values[static_cast<size_t>(id)], sequences[static_cast<size_t>(id)]});
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
