#include "engine/rewrites/graph_patterns.h"

#include <set>

#include "engine/constant_value.h"

namespace dprun {

std::optional<Tensor> constant_value(const Graph& graph, const std::string& value) {
  for (const auto& in : graph.inputs)
    if (in.name == value) return std::nullopt;
  if (auto it = graph.initializers.find(value); it != graph.initializers.end()) return it->second;
  for (const Node& n : graph.nodes)
    if (n.op_type == "Constant" && n.domain.empty() && n.outputs.size() == 1 &&
        n.outputs[0] == value) {
      try {
        return constant_node_value(n);
      } catch (const Error&) {
        return std::nullopt;  // its kernel reports why
      }
    }
  return std::nullopt;
}

std::optional<float> constant_scalar(const Graph& graph, const std::string& value) {
  auto t = constant_value(graph, value);
  if (t && t->dtype() == DType::Float32 && t->numel() == 1) return t->data<float>()[0];
  return std::nullopt;
}

std::optional<double> floating_scalar(const Graph& graph, const std::string& value) {
  auto t = constant_value(graph, value);
  if (!t || !is_floating(t->dtype()) || t->numel() != 1) return std::nullopt;
  return t->item_as_double(0);
}

std::optional<std::vector<int64_t>> constant_ints(const Graph& graph, const std::string& value) {
  auto t = constant_value(graph, value);
  if (!t || t->dtype() != DType::Int64 || t->rank() != 1) return std::nullopt;
  return std::vector<int64_t>(t->data<int64_t>(), t->data<int64_t>() + t->numel());
}

std::optional<std::vector<int64_t>> axes_operand(const Graph& graph, const Node& node) {
  if (node.inputs.size() >= 2 && !node.inputs[1].empty())
    return constant_ints(graph, node.inputs[1]);
  if (!node.has_attr("axes")) return std::nullopt;
  return node.attr_ints("axes");
}

std::map<std::string, std::vector<size_t>> value_readers(const Graph& graph) {
  std::map<std::string, std::vector<size_t>> readers;
  for (size_t i = 0; i < graph.nodes.size(); ++i) {
    std::set<std::string> read(graph.nodes[i].inputs.begin(), graph.nodes[i].inputs.end());
    for (const auto& in : implicit_inputs(graph.nodes[i])) read.insert(in);
    for (const auto& in : read)
      if (!in.empty()) readers[in].push_back(i);
  }
  return readers;
}

bool is_graph_result(const Graph& graph, const std::string& value) {
  for (const auto& v : graph.outputs)
    if (v.name == value) return true;
  for (const auto& [source, param] : graph.state_updates)
    if (source == value || param == value) return true;
  return false;
}

}  // namespace dprun
