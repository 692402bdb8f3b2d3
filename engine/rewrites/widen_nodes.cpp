#include "engine/rewrites/widen_nodes.h"

#include <map>
#include <set>
#include <string>

namespace dprun {
namespace {

/// Every value name of the graph, to keep new names apart from them.
std::set<std::string> value_names(const Graph& graph) {
  std::set<std::string> names;
  for (const auto& v : graph.inputs) names.insert(v.name);
  for (const auto& [name, tensor] : graph.initializers) names.insert(name);
  for (const auto& node : graph.nodes) names.insert(node.outputs.begin(), node.outputs.end());
  return names;
}

/// Builds the rewritten graph node by node.
class Rewriter {
 public:
  explicit Rewriter(const Graph& graph)
      : graph_(graph), names_(value_names(graph)), cast_opset_(cast_opset(graph)) {}

  /// Appends `node` as it is.
  void keep(const Node& node) { nodes_.push_back(node); }

  /// Appends `node` reading float32 copies of its 16-bit inputs and writing float32 values
  /// that Casts turn into its outputs typed 16-bit.
  void widen(const Node& node) {
    Node wide = node;
    for (size_t i = 0; i < node.inputs.size(); ++i)
      if (is_16bit(node.inputs[i])) wide.inputs[i] = float_copy_of(node.inputs[i]);
    std::vector<Node> casts_back;
    for (size_t o = 0; o < node.outputs.size(); ++o) {
      if (!is_16bit(node.outputs[o])) continue;
      const std::string wide_name = fresh_name(node.outputs[o] + "/float32");
      wide.outputs[o] = wide_name;
      value_types_[wide_name] = float_type_of(node.outputs[o]);
      casts_back.push_back(cast_node(wide_name, node.outputs[o],
                                     graph_.type_of(node.outputs[o])->dtype, cast_opset_));
    }
    nodes_.push_back(std::move(wide));
    for (auto& c : casts_back) nodes_.push_back(std::move(c));
  }

  std::shared_ptr<Graph> finish() {
    auto out = std::make_shared<Graph>(graph_);
    out->nodes = std::move(nodes_);
    if (!graph_.opset_imports.count("") && !graph_.opset_imports.count("ai.onnx"))
      out->opset_imports[""] = cast_opset_;
    for (auto& [name, type] : value_types_) out->value_types[name] = type;
    return out;
  }

 private:
  bool is_16bit(const std::string& value) const {
    if (value.empty()) return false;
    std::optional<TensorType> type = graph_.type_of(value);
    return type && is_16bit_float(type->dtype);
  }

  /// The float32 copy of a 16-bit value, made by a Cast at its first reader.
  const std::string& float_copy_of(const std::string& value) {
    auto it = float_copies_.find(value);
    if (it != float_copies_.end()) return it->second;
    const std::string name = fresh_name(value + "/float32");
    value_types_[name] = float_type_of(value);
    nodes_.push_back(cast_node(value, name, DType::Float32, cast_opset_));
    return float_copies_.emplace(value, name).first->second;
  }

  TensorType float_type_of(const std::string& value) const {
    TensorType type = graph_.type_of(value).value_or(TensorType{});
    type.dtype = DType::Float32;
    return type;
  }

  std::string fresh_name(const std::string& base) {
    std::string name = base;
    for (int k = 1; names_.count(name); ++k) name = base + "_" + std::to_string(k);
    names_.insert(name);
    return name;
  }

  const Graph& graph_;
  std::set<std::string> names_;
  const int64_t cast_opset_;
  std::vector<Node> nodes_;
  std::map<std::string, std::string> float_copies_;
  std::map<std::string, TensorType> value_types_;
};

}  // namespace

int64_t cast_opset(const Graph& graph) {
  const bool imported = graph.opset_imports.count("") || graph.opset_imports.count("ai.onnx");
  return imported ? graph.opset("") : 13;
}

Node cast_node(const std::string& from, const std::string& to, DType dtype, int64_t opset) {
  Node n;
  n.name = to + "/cast";
  n.op_type = "Cast";
  n.inputs = {from};
  n.outputs = {to};
  const char* name = dtype == DType::Float32   ? "FLOAT"
                     : dtype == DType::Float16 ? "FLOAT16"
                                               : "BFLOAT16";
  n.attributes["to"] =
      opset >= 6 ? Attribute::of_int(static_cast<int64_t>(dtype)) : Attribute::of_string(name);
  return n;
}

std::shared_ptr<Graph> widen_nodes(const Graph& graph, const std::vector<bool>& widen) {
  Rewriter rewriter(graph);
  for (size_t n = 0; n < graph.nodes.size(); ++n) {
    if (n < widen.size() && widen[n])
      rewriter.widen(graph.nodes[n]);
    else
      rewriter.keep(graph.nodes[n]);
  }
  return rewriter.finish();
}

}  // namespace dprun
