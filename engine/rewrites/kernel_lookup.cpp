#include "engine/rewrites/kernel_lookup.h"

#include <utility>

#include "engine/kernel.h"
#include "engine/rewrites/rewrite_domain.h"

namespace dprun {

std::vector<std::optional<TensorType>> declared_input_types(const Graph& graph, const Node& node) {
  std::vector<std::optional<TensorType>> types;
  for (const auto& name : node.inputs)
    types.push_back(name.empty() ? std::nullopt : graph.type_of(name));
  return types;
}

namespace {

// What the registry is asked about `node`: a rewrite domain's node at version 1 where the graph
// does not import the domain yet.
KernelInfo lookup_info(const Graph& graph, const Node& node,
                       std::vector<std::optional<TensorType>> types, DeviceType device) {
  const bool unimported_rewrite =
      canonical_domain(node.domain) == kRewriteDomain && !graph.opset_imports.count(kRewriteDomain);
  const int64_t opset = unimported_rewrite ? 1 : graph.opset(node.domain);
  return KernelInfo{node, opset, device, std::move(types), {}, &graph};
}

}  // namespace

bool has_kernel(const Graph& graph, const Node& node,
                const std::vector<std::optional<TensorType>>& types, DeviceType device) {
  return !KernelRegistry::instance().candidates(lookup_info(graph, node, types, device)).empty();
}

bool has_kernel(const Graph& graph, const Node& node, DeviceType device) {
  return has_kernel(graph, node, declared_input_types(graph, node), device);
}

bool has_accepting_kernel(const Graph& graph, const Node& node, DeviceType device) {
  const KernelInfo info = lookup_info(graph, node, declared_input_types(graph, node), device);
  for (const KernelDef* def : KernelRegistry::instance().candidates(info))
    if (!def->accepts || def->accepts(info)) return true;
  return false;
}

}  // namespace dprun
