#pragma once
// The typed IR every layer above the loader works on: Graph, Node, Attribute. No protobuf
// type appears here; loader/ converts ONNX ModelProto to and from it.
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/shape.h"
#include "engine/tensor.h"

namespace dprun {

struct Graph;

/// A node attribute: one of the ONNX attribute kinds.
struct Attribute {
  enum class Kind { Float, Int, String, Tensor, Graph, Floats, Ints, Strings, Tensors, Graphs };
  Kind kind = Kind::Int;
  float f = 0;
  int64_t i = 0;
  std::string s;
  dprun::Tensor t;
  std::shared_ptr<dprun::Graph> g;
  std::vector<float> floats;
  std::vector<int64_t> ints;
  std::vector<std::string> strings;
  std::vector<dprun::Tensor> tensors;
  std::vector<std::shared_ptr<dprun::Graph>> graphs;

  /// One attribute of each common kind, for code that builds nodes.
  static Attribute of_int(int64_t v) { return {.kind = Kind::Int, .i = v}; }
  static Attribute of_float(float v) { return {.kind = Kind::Float, .f = v}; }
  static Attribute of_string(std::string v) { return {.kind = Kind::String, .s = std::move(v)}; }
  static Attribute of_tensor(dprun::Tensor v) { return {.kind = Kind::Tensor, .t = std::move(v)}; }
  static Attribute of_ints(std::vector<int64_t> v) {
    return {.kind = Kind::Ints, .ints = std::move(v)};
  }
};

/// One operator application. Input names may be empty for omitted optional inputs.
struct Node {
  std::string name;
  std::string op_type;
  std::string domain;  // "" is the default ONNX domain ("ai.onnx")
  std::vector<std::string> inputs;
  std::vector<std::string> outputs;
  std::map<std::string, Attribute> attributes;

  bool has_attr(const std::string& key) const { return attributes.count(key) != 0; }
  /// Typed attribute getters; the defaulted forms return `fallback` when absent, the others
  /// throw naming the node. A present attribute of the wrong kind always throws.
  int64_t attr_int(const std::string& key) const;
  int64_t attr_int(const std::string& key, int64_t fallback) const;
  float attr_float(const std::string& key) const;
  float attr_float(const std::string& key, float fallback) const;
  std::string attr_string(const std::string& key) const;
  std::string attr_string(const std::string& key, std::string fallback) const;
  std::vector<int64_t> attr_ints(const std::string& key) const;
  std::vector<int64_t> attr_ints(const std::string& key, std::vector<int64_t> fallback) const;
  std::vector<float> attr_floats(const std::string& key) const;
  std::vector<float> attr_floats(const std::string& key, std::vector<float> fallback) const;
  std::vector<std::string> attr_strings(const std::string& key) const;
  Tensor attr_tensor(const std::string& key) const;
  const Attribute* find_attr(const std::string& key) const;

  /// "[Conv] node 'conv1'" — the prefix of every error about this node.
  std::string describe() const;
  /// Throws Error with describe() + ": " + message.
  template <class... Args>
  [[noreturn]] void fail(const Args&... args) const {
    ::dprun::fail(describe(), ": ", args...);
  }
};

/// A graph input or output with its declared type.
struct ValueInfo {
  std::string name;
  TensorType type;
};

/// A dataflow graph of nodes, in topological order once sort_topologically() ran.
struct Graph {
  std::string name;
  std::vector<Node> nodes;
  std::vector<ValueInfo> inputs;  // may include names that also have an initializer
  std::vector<ValueInfo> outputs;
  std::map<std::string, Tensor> initializers;
  /// Types of intermediate values, from shape inference, where known.
  std::map<std::string, TensorType> value_types;
  /// Opset version per domain ("" for ai.onnx). Subgraphs inherit their parent's.
  std::map<std::string, int64_t> opset_imports;
  /// In-place state updates: after a run, the value named by the key is copied into the
  /// storage of the initializer named by the value (BatchNormalization running statistics in
  /// training mode). Replicas sharing storage with the base thus update the base.
  std::map<std::string, std::string> state_updates;
  /// Model-level metadata kept so a saved model round-trips.
  int64_t ir_version = 8;
  std::string producer_name;
  std::string producer_version;
  std::string doc_string;

  /// Inputs the caller must or may feed: graph inputs without an initializer first in
  /// declaration order. Inputs with an initializer are optional overrides.
  std::vector<const ValueInfo*> required_inputs() const;
  /// The opset of `domain` (ai.onnx when empty or "ai.onnx"); throws when not imported.
  int64_t opset(const std::string& domain) const;
  /// The declared type of a value: graph input/output, initializer or inferred; nullptr when
  /// nothing is known.
  std::optional<TensorType> type_of(const std::string& value) const;
  /// Reorders nodes so every value is produced before it is used. Throws naming a node on a
  /// cycle and naming the value when an input is produced by nothing.
  void sort_topologically();
};

/// Names `graph` reads without defining them (as input, initializer or node output), its
/// nested subgraphs included, in order of first use: the outer-scope values of a subgraph.
std::vector<std::string> free_variables(const Graph& graph);
/// The outer-scope values read by the subgraph attributes of `node` (empty for ordinary ops).
std::vector<std::string> implicit_inputs(const Node& node);
/// True when `node` has a graph-valued attribute (If, Loop, Scan).
bool holds_subgraph(const Node& node);

/// "" and "ai.onnx" are the same domain; returns the canonical "".
std::string canonical_domain(const std::string& domain);

}  // namespace dprun
