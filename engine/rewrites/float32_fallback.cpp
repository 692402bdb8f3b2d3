#include "engine/rewrites/float32_fallback.h"

#include <optional>
#include <vector>

#include "engine/rewrites/kernel_lookup.h"
#include "engine/rewrites/widen_nodes.h"

namespace dprun {
namespace {

bool has_output_of_unknown_type(const Graph& graph, const Node& node) {
  for (const auto& name : node.outputs) {
    if (name.empty()) continue;
    std::optional<TensorType> type = graph.type_of(name);
    if (!type || type->dtype == DType::Undefined) return true;
  }
  return false;
}

/// Whether `node`, which has a 16-bit float input and every output typed, runs best in float32
/// on `device`: it has no 16-bit kernel there and a float32 one; or, off the CPU, it has
/// neither there (it will run on the host) and the CPU has a float32 kernel but no 16-bit one.
/// A device's float32 kernel is preferred to the host's 16-bit one: the Casts stay on the
/// device, where the host kernel would need copies both ways.
bool needs_float_kernel(const Graph& graph, const Node& node, DeviceType device) {
  if (holds_subgraph(node) || has_output_of_unknown_type(graph, node)) return false;
  const std::vector<std::optional<TensorType>> types = declared_input_types(graph, node);
  std::vector<std::optional<TensorType>> widened = types;
  bool any_16bit = false;
  for (auto& type : widened)
    if (type && is_16bit_float(type->dtype)) {
      any_16bit = true;
      type->dtype = DType::Float32;
    }
  if (!any_16bit || has_kernel(graph, node, types, device)) return false;
  if (has_kernel(graph, node, widened, device)) return true;
  if (device == DeviceType::CPU || has_kernel(graph, node, types, DeviceType::CPU)) return false;
  return has_kernel(graph, node, widened, DeviceType::CPU);
}

}  // namespace

std::shared_ptr<Graph> compute_half_in_float(const Graph& graph, DeviceType device) {
  std::vector<bool> widen;
  bool any = false;
  for (const Node& node : graph.nodes) {
    widen.push_back(needs_float_kernel(graph, node, device));
    any = any || widen.back();
  }
  return any ? widen_nodes(graph, widen) : nullptr;
}

}  // namespace dprun
