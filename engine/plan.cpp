#include "engine/plan.h"

#include <algorithm>
#include <set>
#include <sstream>

#include "engine/constant_value.h"
#include "engine/env_flag.h"

namespace dprun {

namespace {
// The value of `name` when it is a constant of the plan: an initializer that callers cannot
// override (no graph input of that name), or the output of a Constant node (`constants`,
// constant_node_values, as fixed as such an initializer); nullptr otherwise.
const Tensor* plan_constant(const Graph& graph, const std::map<std::string, Tensor>& constants,
                            const std::string& name) {
  if (name.empty()) return nullptr;
  if (auto c = constants.find(name); c != constants.end()) return &c->second;
  auto it = graph.initializers.find(name);
  if (it == graph.initializers.end()) return nullptr;
  for (const auto& in : graph.inputs)
    if (in.name == name) return nullptr;
  return &it->second;
}

// Kernels see the plan's constants (plan_constant) as constant inputs.
KernelInfo make_info(const Graph& graph, const Node& node, DeviceType device_type,
                     const std::map<std::string, Tensor>& constants, const PlanOptions& options) {
  KernelInfo info{node, graph.opset(node.domain), device_type, {}, {}, &graph};
  info.plan_options = options;
  for (size_t i = 0; i < node.inputs.size(); ++i) {
    const std::string& name = node.inputs[i];
    info.input_types.push_back(name.empty() ? std::nullopt : graph.type_of(name));
    if (const Tensor* c = plan_constant(graph, constants, name))
      info.constant_inputs.emplace(i, *c);
  }
  info.implicit_inputs = implicit_inputs(node);
  for (const auto& name : info.implicit_inputs) info.input_types.push_back(graph.type_of(name));
  return info;
}

// A node's kernel, and what the planner could not check about it.
struct BuiltKernel {
  std::unique_ptr<OpKernel> kernel;
  /// Set when the kernel's definition accepts only some dtypes of an input whose dtype the
  /// graph does not give: that input's index, and the accepted dtypes.
  std::optional<int> unchecked_input;
  std::vector<DType> accepted;
  /// The definition that built the kernel, and the constant inputs it was given.
  const KernelDef* def = nullptr;
  std::map<size_t, Tensor> constant_inputs;
};

// Per input slot of `node`, whether it is one of `slots` (empty when none is).
std::vector<bool> slots_of(const Node& node, const std::vector<int>& slots) {
  std::vector<bool> marked;
  for (int slot : slots) {
    if (slot < 0 || static_cast<size_t>(slot) >= node.inputs.size()) continue;
    marked.resize(node.inputs.size(), false);
    marked[static_cast<size_t>(slot)] = true;
  }
  return marked;
}

// Builds one node's kernel; on failure the kernel is nullptr and `why` says why.
BuiltKernel build_kernel(const Graph& graph, const Node& node, DeviceType device_type,
                         const std::map<std::string, Tensor>& constants, const PlanOptions& options,
                         std::string& why) {
  BuiltKernel built;
  try {
    KernelInfo info = make_info(graph, node, device_type, constants, options);
    const KernelDef* def = nullptr;
    built.kernel = KernelRegistry::instance().create(info, &why, "", &def);
    if (built.kernel) {
      built.def = def;
      built.constant_inputs = std::move(info.constant_inputs);
    }
    if (!built.kernel || def->dtypes.empty()) return built;
    const size_t input = static_cast<size_t>(def->dtype_input);
    const bool known = input < info.input_types.size() && info.input_types[input] &&
                       info.input_types[input]->dtype != DType::Undefined;
    if (!known && input < node.inputs.size()) {
      built.unchecked_input = def->dtype_input;
      built.accepted = def->dtypes;
    }
  } catch (const Error& e) {
    why = e.what();
    built.kernel = nullptr;
  }
  return built;
}

// Makes `cpu`, the node's CPU kernel, the step's kernel off the CPU: it reads in place the
// inputs it reads only the dims of, and the run takes no device kernel for any dtype.
void use_host_kernel(const Node& node, BuiltKernel cpu, PlanStep& step) {
  step.kernel = std::move(cpu.kernel);
  step.kernel_device = DeviceType::CPU;
  step.inputs_in_place = slots_of(node, cpu.def->metadata_inputs);
  step.host_kernel.reset();
  step.device_dtypes.clear();
}

// Fills the step's kernel: the node's kernel on `device_type`, else (off the CPU) its CPU
// kernel, and, for a device kernel whose input dtype the planner could not check, the CPU
// kernel the run falls back to for other dtypes. `placed` says where the kernel runs (unset
// when neither exists) and `why` why `device_type` has none.
void place_kernel(const Graph& graph, const Node& node, DeviceType device_type,
                  const std::map<std::string, Tensor>& constants, const PlanOptions& options,
                  PlanStep& step, std::optional<DeviceType>& placed, std::string& why) {
  placed.reset();
  BuiltKernel built = build_kernel(graph, node, device_type, constants, options, why);
  if (built.kernel) {
    placed = device_type;
    step.kernel = std::move(built.kernel);
    if (device_type == DeviceType::CPU) return;
    step.inputs_in_place = slots_of(node, built.def->host_inputs);
    // A constant the kernel reads on the host is handed over from the plan's host copy: on a
    // GPU, reading the device copy back would wait for the stream.
    for (int slot : built.def->host_inputs)
      if (auto c = built.constant_inputs.find(static_cast<size_t>(slot));
          c != built.constant_inputs.end())
        step.host_constants.emplace(c->first, c->second);
    if (!built.unchecked_input) return;
    std::string cpu_why;
    step.host_kernel =
        build_kernel(graph, node, DeviceType::CPU, constants, options, cpu_why).kernel;
    if (step.host_kernel) {
      step.dtype_input = *built.unchecked_input;
      step.device_dtypes = std::move(built.accepted);
    }
    return;
  }
  if (device_type == DeviceType::CPU) return;
  std::string cpu_why;
  BuiltKernel cpu = build_kernel(graph, node, DeviceType::CPU, constants, options, cpu_why);
  if (cpu.kernel) {
    placed = DeviceType::CPU;
    use_host_kernel(node, std::move(cpu), step);
  } else if (cpu_why != why) {  // an unknown op is unknown everywhere: say it once
    why += "; on the cpu: " + cpu_why;
  }
}

// Whether `value` has a known type small enough to keep on the host as shape arithmetic's
// result: integer or bool (dims, axes, masks over them) of rank 0 or 1, or, for a node that runs
// on the host anyway (no device kernel), of rank 2 with a first dim of at most 8 (NonZero of a
// mask over a shape: one row per dim of the mask); or floating, of rank 0 or 1 with at most 8
// elements known from the type (a count cast to float, Resize's scales, Range's bounds). A float
// made from dims of unknown count (a pooling gradient's zeros) may be large: it is made on the
// device that computes with it.
bool is_small_typed(const Graph& graph, const std::string& value, bool host_anyway) {
  const auto type = graph.type_of(value);
  if (!type || !type->shape || type->dtype == DType::Undefined || type->dtype == DType::String)
    return false;
  const SymbolicShape& shape = *type->shape;
  if (is_floating(type->dtype)) {
    if (shape.size() > 1) return false;
    return shape.empty() || (shape[0].is_known() && shape[0].value <= 8);
  }
  return shape.size() <= 1 ||
         (host_anyway && shape.size() == 2 && shape[0].is_known() && shape[0].value <= 8);
}

// Whether an output of `node` is typed floating.
bool has_floating_output(const Graph& graph, const Node& node) {
  for (const auto& out : node.outputs) {
    const auto type = out.empty() ? std::nullopt : graph.type_of(out);
    if (type && is_floating(type->dtype)) return true;
  }
  return false;
}

// Whether the step's device kernel reads every input of `node` on the host (ConstantOfShape,
// Range). Such a kernel makes floating values (a gradient's seed of ones) on the device at no
// copy at all; made on the host, they would cost a copy over to the device math that reads them.
bool reads_only_on_host(const Node& node, const PlanStep& step) {
  if (step.kernel_device == DeviceType::CPU) return false;
  for (size_t i = 0; i < node.inputs.size(); ++i)
    if (!node.inputs[i].empty() && !(i < step.inputs_in_place.size() && step.inputs_in_place[i]))
      return false;
  return true;
}

// Whether the kernel of `def` reads only the dims of every input `node` gives it.
bool reads_dims_only(const Node& node, const KernelDef& def) {
  const std::vector<bool> dims_only = slots_of(node, def.metadata_inputs);
  for (size_t i = 0; i < node.inputs.size(); ++i)
    if (!node.inputs[i].empty() && (i >= dims_only.size() || !dims_only[i])) return false;
  return true;
}

// Off the CPU, moves shape arithmetic to the host. A node is shape arithmetic when it reads
// only the dims of its input, a constant's included (a CPU kernel whose
// KernelDef::metadata_inputs cover its inputs: Shape, Size), or when every input is shape
// arithmetic's result or a constant of the plan (a node the device has no kernel for included:
// integer Div of two sizes then runs on the host without copies); and every output is small
// (is_small_typed). Without types (a graph no inference reached) nothing moves. Nodes with
// subgraphs stay where they were placed.
// DPRUN_NO_SHAPE_ARITHMETIC=1 keeps every node on the device (to measure what moving them gains).
void place_shape_arithmetic(const Graph& graph, DeviceType device_type,
                            const std::map<std::string, Tensor>& constants,
                            const PlanOptions& options, std::vector<PlanStep>& steps) {
  if (device_type == DeviceType::CPU || env_flag("DPRUN_NO_SHAPE_ARITHMETIC")) return;
  std::set<std::string> on_host;  // results of shape arithmetic
  for (PlanStep& step : steps) {
    const Node& node = graph.nodes[step.node_index];
    const bool host_fallback = step.kernel_device == DeviceType::CPU;
    if ((step.kernel_device != device_type && !host_fallback) || !step.implicit_inputs.empty())
      continue;
    size_t read = 0, from_host = 0, constant = 0;
    for (const auto& in : node.inputs) {
      if (in.empty()) continue;
      ++read;
      from_host += on_host.count(in);
      constant += !on_host.count(in) && plan_constant(graph, constants, in) != nullptr;
    }
    bool small = !node.outputs.empty();
    for (const auto& out : node.outputs)
      small = small && (out.empty() || is_small_typed(graph, out, host_fallback));
    const bool makes_floats = has_floating_output(graph, node);
    if (!small || (makes_floats && reads_only_on_host(node, step))) continue;
    // Integer work on constants alone (an Unsqueeze of a constant into a shape's entry) counts
    // too: its results join computed dims in the shapes that kernels read on the host. Float
    // work on constants alone stays with the device math that reads it.
    const bool from_shapes =
        read > 0 && from_host + constant == read && (from_host > 0 || !makes_floats);
    // Otherwise, with one input that is no such result (a constant's dims are as good), the
    // node may read only its dims.
    const bool may_read_dims = !from_shapes && read == 1;
    if (!from_shapes && (!may_read_dims || host_fallback)) continue;
    std::string why;
    BuiltKernel cpu = build_kernel(graph, node, DeviceType::CPU, constants, options, why);
    if (!cpu.kernel) continue;
    if (may_read_dims && !reads_dims_only(node, *cpu.def)) continue;
    step.host_constants = std::move(cpu.constant_inputs);
    use_host_kernel(node, std::move(cpu), step);
    step.shape_arithmetic = true;
    for (const auto& out : node.outputs)
      if (!out.empty()) on_host.insert(out);
  }
}

// An input slot may be written over when its value dies here and is read through no other
// slot of the step (Mul(x, x) must keep x intact while it reads it twice).
void mark_released_inputs(PlanStep& step) {
  step.inputs_released.assign(step.inputs.size(), false);
  for (size_t i = 0; i < step.inputs.size(); ++i) {
    const int id = step.inputs[i];
    if (id < 0 || std::count(step.release_after.begin(), step.release_after.end(), id) == 0)
      continue;
    step.inputs_released[i] = std::count(step.inputs.begin(), step.inputs.end(), id) == 1;
  }
}
}  // namespace

std::vector<NodePlacement> place_nodes(const Graph& graph, DeviceType device_type) {
  std::vector<NodePlacement> placements;
  std::vector<PlanStep> steps;
  const std::map<std::string, Tensor> constants = constant_node_values(graph);
  for (size_t n = 0; n < graph.nodes.size(); ++n) {
    NodePlacement p{.node = &graph.nodes[n]};
    PlanStep step;
    step.node_index = n;
    place_kernel(graph, graph.nodes[n], device_type, constants, PlanOptions{}, step, p.device,
                 p.why_not);
    if (p.device) step.kernel_device = *p.device;
    step.implicit_inputs = implicit_inputs(graph.nodes[n]);
    placements.push_back(std::move(p));
    steps.push_back(std::move(step));
  }
  place_shape_arithmetic(graph, device_type, constants, PlanOptions{}, steps);
  for (size_t n = 0; n < steps.size(); ++n) {
    NodePlacement& p = placements[n];
    const PlanStep& step = steps[n];
    if (step.shape_arithmetic) {
      p.device = DeviceType::CPU;
      p.shape_arithmetic = true;
    } else if (step.host_kernel) {
      p.device_dtypes = step.device_dtypes;
      p.dtype_input = step.dtype_input;
    }
  }
  return placements;
}

int Plan::value_id(const std::string& name) const {
  auto it = value_ids_.find(name);
  return it == value_ids_.end() ? -1 : it->second;
}

std::shared_ptr<const Plan> Plan::build(std::shared_ptr<const Graph> graph_ptr,
                                        DeviceType device_type,
                                        const std::vector<std::string>& outer_values,
                                        const PlanOptions& options) {
  auto plan = std::shared_ptr<Plan>(new Plan());
  plan->graph_ = graph_ptr;
  plan->device_type_ = device_type;
  plan->options_ = options;
  const Graph& graph = *graph_ptr;

  auto intern = [&](const std::string& name) {
    auto [it, inserted] =
        plan->value_ids_.emplace(name, static_cast<int>(plan->value_names_.size()));
    if (inserted) plan->value_names_.push_back(name);
    return it->second;
  };
  for (const auto& in : graph.inputs)
    if (!graph.initializers.count(in.name)) plan->feed_ids_.push_back(intern(in.name));
  for (const auto& name : outer_values) {
    DPRUN_CHECK(!plan->value_ids_.count(name), "outer-scope value '", name,
                "' is also an input of graph '", graph.name, "'");
    plan->feed_ids_.push_back(intern(name));
  }
  for (const auto& [name, tensor] : graph.initializers)
    plan->parameter_ids_.push_back(intern(name));

  std::vector<std::string> missing;
  const std::map<std::string, Tensor> constants = constant_node_values(graph);
  for (size_t n = 0; n < graph.nodes.size(); ++n) {
    const Node& node = graph.nodes[n];
    PlanStep step;
    step.node_index = n;
    for (const auto& in : node.inputs) {
      if (in.empty()) {
        step.inputs.push_back(-1);
        continue;
      }
      DPRUN_CHECK(plan->value_ids_.count(in), node.describe(), ": input '", in,
                  "' is not produced by any node, graph input or initializer");
      step.inputs.push_back(plan->value_ids_.at(in));
    }
    step.implicit_inputs = implicit_inputs(node);
    for (const auto& name : step.implicit_inputs) {
      DPRUN_CHECK(plan->value_ids_.count(name), node.describe(), ": its subgraph reads '", name,
                  "', which is not produced before it in graph '", graph.name, "'");
      step.inputs.push_back(plan->value_ids_.at(name));
    }
    for (const auto& out : node.outputs) step.outputs.push_back(out.empty() ? -1 : intern(out));
    std::string why;
    std::optional<DeviceType> placed;
    place_kernel(graph, node, device_type, constants, options, step, placed, why);
    if (step.kernel)
      step.kernel_device = *placed;
    else
      missing.push_back(node.describe() + " (" + why + ")");
    plan->steps_.push_back(std::move(step));
  }
  place_shape_arithmetic(graph, device_type, constants, options, plan->steps_);
  if (!missing.empty()) {
    std::ostringstream msg;
    msg << missing.size() << " node" << (missing.size() > 1 ? "s have" : " has") << " no "
        << device_type_name(device_type) << " kernel"
        << (device_type == DeviceType::CPU ? "" : " (nor a cpu kernel to fall back on)") << ": ";
    for (size_t i = 0; i < missing.size(); ++i) msg << (i ? "; " : "") << missing[i];
    fail(msg.str());
  }
  for (const auto& out : graph.outputs) {
    DPRUN_CHECK(plan->value_ids_.count(out.name), "graph output '", out.name,
                "' is not produced by any node, input or initializer");
    plan->output_ids_.push_back(plan->value_ids_.at(out.name));
  }

  // Liveness: a value may be released after its last reader, unless it is a graph output, a
  // parameter, or feeds a state update. Outputs nobody reads are marked unwanted.
  std::vector<int> last_reader(plan->value_names_.size(), -1);
  std::vector<bool> keep(plan->value_names_.size(), false);
  for (int id : plan->output_ids_) keep[static_cast<size_t>(id)] = true;
  for (int id : plan->parameter_ids_) keep[static_cast<size_t>(id)] = true;
  for (const auto& [value, param] : graph.state_updates)
    if (int id = plan->value_id(value); id >= 0) keep[static_cast<size_t>(id)] = true;
  for (size_t s = 0; s < plan->steps_.size(); ++s)
    for (int id : plan->steps_[s].inputs)
      if (id >= 0) last_reader[static_cast<size_t>(id)] = static_cast<int>(s);
  for (size_t s = 0; s < plan->steps_.size(); ++s) {
    PlanStep& step = plan->steps_[s];
    for (int id : step.outputs)
      step.outputs_wanted.push_back(
          id >= 0 && (keep[static_cast<size_t>(id)] || last_reader[static_cast<size_t>(id)] >= 0));
  }
  for (size_t v = 0; v < last_reader.size(); ++v)
    if (!keep[v] && last_reader[v] >= 0)
      plan->steps_[static_cast<size_t>(last_reader[v])].release_after.push_back(
          static_cast<int>(v));
  for (PlanStep& step : plan->steps_) mark_released_inputs(step);
  return plan;
}

}  // namespace dprun
