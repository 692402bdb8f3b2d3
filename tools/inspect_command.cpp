// `dprun inspect MODEL.onnx [--devices LIST]`: what a model takes, gives, uses, what dprun
// lacks for it, what each device type's graph rewrite makes of it, and on which device each of
// the rewritten nodes would run.
#include <algorithm>
#include <cstdio>
#include <map>
#include <set>

#include "engine/backend.h"
#include "engine/parallel/device_list.h"
#include "engine/plan.h"
#include "engine/plan_reads.h"
#include "engine/rewrites/device_rewrites.h"
#include "engine/rewrites/half_precision.h"
#include "engine/rewrites/rewrite_domain.h"
#include "loader/onnx_loader.h"
#include "tools/command_line.h"
#include "tools/commands.h"
#include "tools/parallel_options.h"

namespace dprun::cli {

namespace {

// Why `device` cannot run here (no backend in this build, no such device), or empty.
std::string unusable_reason(Device device) {
  try {
    backend_for(device).check_device(device);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

std::string op_name(const Node& node) {
  return (node.domain.empty() ? "" : node.domain + "::") + node.op_type;
}

// The nodes a backend's rewrite introduced (its domain), by op, with the activations fused
// into them: "dprun::MatMulBias 12 (Gelu 2)".
std::string introduced_ops(const Graph& compiled) {
  // By op, then by the activation fused into it ("" for none).
  std::map<std::string, std::map<std::string, int>> introduced;
  for (const Node& node : compiled.nodes)
    if (node.domain == kRewriteDomain)
      introduced[op_name(node)][node.attr_string("activation", "")]++;
  std::string ops;
  for (const auto& [op, activations] : introduced) {
    int count = 0;
    std::string fused;
    for (const auto& [activation, n] : activations) {
      count += n;
      if (!activation.empty())
        fused += (fused.empty() ? "" : ", ") + activation + " " + std::to_string(n);
    }
    ops += (ops.empty() ? "" : ", ") + op + " " + std::to_string(count) +
           (fused.empty() ? "" : " (" + fused + ")");
  }
  return ops;
}

// The nodes the 16-bit rewrite runs in float32 between Casts (float32_fallback.h), by op: the
// readers of the float32 copies its Casts make, values the graph did not have.
std::map<std::string, int> nodes_in_float32(const Graph& graph, const Graph& compiled) {
  std::set<std::string> existing;
  for (const auto& in : graph.inputs) existing.insert(in.name);
  for (const auto& [name, tensor] : graph.initializers) existing.insert(name);
  for (const Node& node : graph.nodes) existing.insert(node.outputs.begin(), node.outputs.end());
  std::set<std::string> copies;
  for (const Node& node : compiled.nodes)
    if (node.op_type == "Cast" && !existing.count(node.outputs[0])) copies.insert(node.outputs[0]);
  std::map<std::string, int> ops;
  for (const Node& node : compiled.nodes)
    if (node.op_type != "Cast" &&
        std::any_of(node.inputs.begin(), node.inputs.end(),
                    [&](const std::string& in) { return copies.count(in) > 0; }))
      ops[op_name(node)]++;
  return ops;
}

// The graph as `type`'s backend compiles it (rewrite_for_device, as a Model does), with a
// line saying what the rewrite changed (node counts, the nodes it introduced, the Casts it added
// around 16-bit nodes) and one naming the nodes it runs in float32. The graph itself where this
// build has no such backend.
std::shared_ptr<const Graph> print_rewrite(std::shared_ptr<const Graph> graph, DeviceType type) {
  Backend* backend = nullptr;
  try {
    backend = &backend_for(type);
  } catch (const Error&) {
    return graph;
  }
  std::shared_ptr<const Graph> compiled = rewrite_for_device(*backend, graph, {});
  if (compiled == graph) return graph;
  std::string ops = introduced_ops(*compiled);
  auto casts = [](const Graph& g) {
    return std::count_if(g.nodes.begin(), g.nodes.end(),
                         [](const Node& n) { return n.op_type == "Cast"; });
  };
  if (const auto added = casts(*compiled) - casts(*graph); added > 0) {
    if (!ops.empty()) ops += ", ";
    ops += "Cast " + std::to_string(added) + " (16-bit values to and from float32 kernels)";
  }
  std::printf("rewrite for %s: %zu nodes become %zu (%s)\n",
              std::string(device_type_name(type)).c_str(), graph->nodes.size(),
              compiled->nodes.size(), ops.c_str());
  std::string widened;
  for (const auto& [op, n] : nodes_in_float32(*graph, *compiled))
    widened += (widened.empty() ? "" : ", ") + op + " " + std::to_string(n);
  if (!widened.empty()) std::printf("  in float32 between Casts: %s\n", widened.c_str());
  return compiled;
}

// What every run reads back from the device (engine/plan_reads.h): each copy makes the host
// wait for the device.
void print_device_reads(std::shared_ptr<const Graph> graph, DeviceType type) {
  std::vector<DeviceRead> reads;
  try {
    reads = device_reads_per_run(*Plan::build(graph, type));
  } catch (const Error&) {
    return;  // nodes without a kernel anywhere: the placement lists them
  }
  const std::string name(device_type_name(type));
  std::printf("  copies back from %s per run: %zu%s\n", name.c_str(), reads.size(),
              reads.empty() ? "" : " (the host waits for the device at each)");
  for (const DeviceRead& r : reads)
    std::printf("    %s, input %zu of %s%s\n", r.value.c_str(), r.slot,
                r.reader->describe().c_str(),
                r.by_device_kernel ? ", which its kernel reads on the host" : "");
}

// Where each node of the graph compiled for `device`'s type runs: the counts, then every node
// that falls back to the cpu or has no kernel at all. Planning needs no device, so this works
// where `device` is absent; a note says so.
void print_placement(std::shared_ptr<const Graph> loaded, Device device) {
  const DeviceType type = device.type;
  const std::string name(device_type_name(type));
  const std::shared_ptr<const Graph> graph = print_rewrite(loaded, type);
  std::vector<NodePlacement> placements = place_nodes(*graph, type);
  size_t native = 0, fallback = 0, missing = 0, shape_arithmetic = 0;
  for (const NodePlacement& p : placements)
    ++(!p.device            ? missing
       : p.shape_arithmetic ? shape_arithmetic
       : *p.device == type  ? native
                            : fallback);
  std::printf("placement on %s: %zu node%s on %s", name.c_str(), native, native == 1 ? "" : "s",
              name.c_str());
  if (type != DeviceType::CPU)
    std::printf(", %zu on the cpu (no %s kernel)", fallback, name.c_str());
  if (missing) std::printf(", %zu without any kernel", missing);
  std::printf("\n");
  if (shape_arithmetic)
    std::printf("  shape arithmetic on the cpu: %zu node%s, their results kept on the host\n",
                shape_arithmetic, shape_arithmetic == 1 ? "" : "s");
  if (type != DeviceType::CPU) print_device_reads(graph, type);
  if (std::string why = unusable_reason(device); !why.empty())
    std::printf("  note: %s\n", why.c_str());
  for (const NodePlacement& p : placements) {
    if ((p.device && *p.device == type) || p.shape_arithmetic) continue;
    std::printf("  %-4s %s (%s)\n", p.device ? "cpu" : "none", p.node->describe().c_str(),
                p.why_not.c_str());
  }
  for (const NodePlacement& p : placements) {
    if (p.device_dtypes.empty()) continue;
    std::string accepted;
    for (DType t : p.device_dtypes)
      accepted += (accepted.empty() ? "" : ", ") + std::string(dtype_name(t));
    std::printf("  %-4s %s (on the cpu when input %d is not %s: its dtype is not in the graph)\n",
                name.c_str(), p.node->describe().c_str(), p.dtype_input, accepted.c_str());
  }
}

struct InspectFlags {
  std::string model;
  std::optional<std::string> devices, precision;
};

std::unique_ptr<CLI::App> inspect_app(InspectFlags& flags) {
  auto app = command_app(
      "usage: dprun inspect MODEL.onnx [options]\n"
      "inputs, outputs, opsets, op histogram and parameters of a model");
  add_model_path(*app, flags.model);
  add_text(*app, "--devices", "LIST", flags.devices,
           "also show where each node runs on those devices' backends, the backend's rewrite, "
           "and what a run copies back from a GPU");
  add_precision_option(*app, flags.precision,
                       "inspect the model as --precision converts it for run and bench");
  return app;
}

int inspect(const InspectFlags& flags) {
  const std::string& path = flags.model;
  std::vector<Device> devices;  // whose placement to show
  if (const auto& list = flags.devices) {
    try {
      devices = parse_device_list(*list);
    } catch (const Error& e) {
      throw UsageError(std::string("--devices: ") + e.what());
    }
  }
  std::shared_ptr<const Graph> graph = load_graph(path);
  const DType precision = precision_of(flags.precision).value_or(DType::Float32);
  if (precision != DType::Float32) graph = to_half_precision(*graph, {.dtype = precision});

  std::printf("model %s\n", path.c_str());
  if (precision != DType::Float32)
    std::printf("  converted to %s (float32 inputs and outputs kept)\n",
                std::string(dtype_name(precision)).c_str());
  std::printf("  graph '%s', IR version %lld, producer %s %s\n", graph->name.c_str(),
              static_cast<long long>(graph->ir_version), graph->producer_name.c_str(),
              graph->producer_version.c_str());
  std::printf("opset imports:\n");
  for (const auto& [domain, version] : graph->opset_imports)
    std::printf("  %-20s %lld\n", domain.empty() ? "ai.onnx" : domain.c_str(),
                static_cast<long long>(version));
  std::printf("inputs:\n");
  for (const ValueInfo* in : graph->required_inputs())
    std::printf("  %-24s %s\n", in->name.c_str(), in->type.to_string().c_str());
  for (const auto& in : graph->inputs)
    if (graph->initializers.count(in.name))
      std::printf("  %-24s %s (optional, has a default)\n", in.name.c_str(),
                  in.type.to_string().c_str());
  std::printf("outputs:\n");
  for (const auto& out : graph->outputs)
    std::printf("  %-24s %s\n", out.name.c_str(), out.type.to_string().c_str());

  std::map<std::string, int> histogram;
  for (const Node& node : graph->nodes)
    histogram[(node.domain.empty() ? "" : node.domain + "::") + node.op_type]++;
  std::printf("ops (%zu nodes):\n", graph->nodes.size());
  for (const auto& [op, count] : histogram) std::printf("  %-28s %d\n", op.c_str(), count);

  int64_t params = 0;
  size_t bytes = 0;
  for (const auto& [name, t] : graph->initializers) {
    params += t.numel();
    bytes += t.nbytes();
  }
  std::printf("parameters: %zu tensors, %lld values, %.2f MB\n", graph->initializers.size(),
              static_cast<long long>(params), static_cast<double>(bytes) / 1e6);

  // On the cpu, where nothing falls back, as the CPU backend compiles the graph.
  std::vector<std::string> missing;
  const auto for_cpu = rewrite_for_device(backend_for(DeviceType::CPU), graph, {});
  for (const NodePlacement& p : place_nodes(*for_cpu, DeviceType::CPU))
    if (!p.device) missing.push_back(p.node->describe() + " (" + p.why_not + ")");
  if (missing.empty()) {
    std::printf("kernels: every node has a cpu kernel\n");
  } else {
    std::printf("kernels: %zu node%s without a cpu kernel:\n", missing.size(),
                missing.size() == 1 ? "" : "s");
    for (const auto& m : missing) std::printf("  %s\n", m.c_str());
  }
  std::set<DeviceType> types;
  for (const Device& d : devices)
    if (types.insert(d.type).second) print_placement(graph, d);
  return 0;
}

}  // namespace

int inspect_command(int argc, char** argv, int first) {
  InspectFlags flags;
  auto app = inspect_app(flags);
  parse_command_line(*app, argc, argv, first);
  return inspect(flags);
}

std::string inspect_help() {
  InspectFlags flags;
  return command_help(*inspect_app(flags));
}

}  // namespace dprun::cli
