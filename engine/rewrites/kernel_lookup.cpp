#include "engine/rewrites/kernel_lookup.h"

#include "engine/kernel.h"
#include "engine/rewrites/rewrite_domain.h"

namespace dprun {

std::vector<std::optional<TensorType>> declared_input_types(const Graph& graph, const Node& node) {
  std::vector<std::optional<TensorType>> types;
  for (const auto& name : node.inputs)
    types.push_back(name.empty() ? std::nullopt : graph.type_of(name));
  return types;
}

bool has_kernel(const Graph& graph, const Node& node,
                const std::vector<std::optional<TensorType>>& types, DeviceType device) {
  const bool unimported_rewrite =
      canonical_domain(node.domain) == kRewriteDomain && !graph.opset_imports.count(kRewriteDomain);
  const int64_t opset = unimported_rewrite ? 1 : graph.opset(node.domain);
  KernelInfo info{node, opset, device, types, {}, &graph};
  return !KernelRegistry::instance().candidates(info).empty();
}

bool has_kernel(const Graph& graph, const Node& node, DeviceType device) {
  return has_kernel(graph, node, declared_input_types(graph, node), device);
}

}  // namespace dprun
