#pragma once
// Builds and runs small multi-node graphs (with subgraphs) for tests of sequences, strings
// and control flow.
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "engine/model.h"
#include "op_test_util.h"

namespace dprun::testing {

template <class T>
std::vector<T> values_of(const Tensor& t) {
  return std::vector<T>(t.data<T>(), t.data<T>() + t.numel());
}

inline Attribute graph_attr(std::shared_ptr<Graph> g) {
  Attribute a;
  a.kind = Attribute::Kind::Graph;
  a.g = std::move(g);
  return a;
}

inline Attribute tensor_attr(Tensor t) {
  Attribute a;
  a.kind = Attribute::Kind::Tensor;
  a.t = std::move(t);
  return a;
}

inline Attribute strings_attr(std::vector<std::string> v) {
  Attribute a;
  a.kind = Attribute::Kind::Strings;
  a.strings = std::move(v);
  return a;
}

inline Attribute ints_attr(std::vector<int64_t> v) {
  Attribute a;
  a.kind = Attribute::Kind::Ints;
  a.ints = std::move(v);
  return a;
}

/// A float32 tensor type of fully known `shape`.
inline TensorType float32_type(const Shape& shape) {
  TensorType t{DType::Float32, SymbolicShape{}};
  for (int64_t d : shape) t.shape->push_back(Dim::known(d));
  return t;
}

/// A Constant node producing `value` as `output`.
inline Node constant_node(const std::string& output, Tensor value) {
  Node n = make_node("Constant", {}, {output});
  n.name = "const_" + output;
  n.attributes["value"] = tensor_attr(std::move(value));
  return n;
}

/// A graph over `nodes`; `inputs` are declared with the dtype (and no shape) of the paired
/// example tensor; `untyped_inputs` are declared without type (sequences, optionals).
inline std::shared_ptr<Graph> make_graph(std::vector<Node> nodes,
                                         std::vector<std::pair<std::string, DType>> inputs,
                                         std::vector<std::string> outputs,
                                         std::vector<std::string> untyped_inputs = {}) {
  auto g = std::make_shared<Graph>();
  g->name = "test_graph";
  for (auto& [name, dtype] : inputs) g->inputs.push_back({name, {dtype, std::nullopt}});
  for (auto& name : untyped_inputs) g->inputs.push_back({name, {}});
  for (auto& name : outputs) g->outputs.push_back({name, {}});
  for (size_t i = 0; i < nodes.size(); ++i) {
    if (nodes[i].name.empty() || nodes[i].name.find("_under_test") != std::string::npos)
      nodes[i].name = nodes[i].op_type + "_" + std::to_string(i);
    g->nodes.push_back(std::move(nodes[i]));
  }
  return g;
}

/// Runs a top-level graph at `opset` with tensor feeds in input order.
inline std::vector<Tensor> run_graph(std::shared_ptr<Graph> g, const std::vector<Tensor>& feeds,
                                     int64_t opset) {
  g->opset_imports[""] = opset;
  g->sort_topologically();
  Model model(g, Device::cpu());
  return model.run(feeds);
}

}  // namespace dprun::testing
