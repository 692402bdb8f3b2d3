#pragma once
// Pattern matching for graph rewrites: a Matcher answers who produces and who reads each value
// of a graph, a pattern turns the chain starting at a node into a Fusion, and apply_fusions
// replaces every chain a pattern finds by its fused node. Shared by the backends' rewrites
// (engine/rewrites/op_fusion.h, engine/backends/cpu/channels_last_fusion.h).
#include <functional>
#include <initializer_list>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/graph.h"
#include "engine/rewrites/graph_patterns.h"
#include "engine/rewrites/rewrite_domain.h"

namespace dprun {

/// A chain of nodes to replace by one: `nodes` go away, `fused` takes the place of the chain's
/// last node (after every producer of the chain's inputs, before every reader of its result),
/// preceded by `before` where a rewrite needs more nodes than one. A fused node with several
/// outputs may have readers placed before that last node: the rewritten graph is then sorted
/// again, keeping every other node's order.
struct Fusion {
  std::vector<size_t> nodes;
  Node fused;
  std::vector<Node> before = {};
};

/// Pattern matching over one graph: who produces and who reads each value.
class Matcher {
 public:
  explicit Matcher(const Graph& graph) : graph_(graph), readers_(value_readers(graph)) {
    for (size_t i = 0; i < graph.nodes.size(); ++i)
      for (const auto& out : graph.nodes[i].outputs)
        if (!out.empty()) producer_[out] = i;
  }

  const Graph& graph() const { return graph_; }

  /// The node producing `value` if it is a plain ai.onnx `op` node with one output.
  std::optional<size_t> producer(const std::string& value, const char* op) const {
    auto it = producer_.find(value);
    if (it == producer_.end() || !is(it->second, op)) return std::nullopt;
    return it->second;
  }

  /// The node producing `value`, whatever its op.
  std::optional<size_t> producer(const std::string& value) const {
    auto it = producer_.find(value);
    if (it == producer_.end()) return std::nullopt;
    return it->second;
  }

  /// The nodes reading `value` (each once, in graph order); empty when none does.
  const std::vector<size_t>& readers(const std::string& value) const {
    static const std::vector<size_t> none;
    auto it = readers_.find(value);
    return it == readers_.end() ? none : it->second;
  }

  /// The single reader of `value` if `value` is read by nothing else and is no graph result.
  std::optional<size_t> only_reader(const std::string& value) const {
    auto it = readers_.find(value);
    if (it == readers_.end() || it->second.size() != 1 || is_graph_result(graph_, value))
      return std::nullopt;
    return it->second[0];
  }

  /// only_reader(value) if that reader is a plain ai.onnx `op` node with one output.
  std::optional<size_t> only_reader(const std::string& value, const char* op) const {
    auto reader = only_reader(value);
    if (!reader || !is(*reader, op)) return std::nullopt;
    return reader;
  }

  /// The operand of binary node `i` other than `value`, when `value` is exactly one of its two.
  std::optional<std::string> other_operand(size_t i, const std::string& value) const {
    const Node& n = graph_.nodes[i];
    if (n.inputs.size() != 2 || n.inputs[0] == n.inputs[1]) return std::nullopt;
    if (n.inputs[0] == value) return n.inputs[1];
    if (n.inputs[1] == value) return n.inputs[0];
    return std::nullopt;
  }

  /// `base`, or `base` with a "#k" suffix, whichever first names no value of the graph.
  std::string fresh_name(const std::string& base) const {
    std::string name = base;
    for (int k = 1; producer_.count(name) || readers_.count(name) ||
                    is_initializer_or_input(name) || is_graph_result(graph_, name);
         ++k)
      name = base + "#" + std::to_string(k);
    return name;
  }

  /// True when `value` is a one-element constant of a floating type within 1e-5 (relative) of
  /// `want`.
  bool is_constant_near(const std::string& value, double want) const;

 private:
  bool is_initializer_or_input(const std::string& name) const {
    if (graph_.initializers.count(name)) return true;
    for (const auto& in : graph_.inputs)
      if (in.name == name) return true;
    return false;
  }

  bool is(size_t i, const char* op) const {
    const Node& n = graph_.nodes[i];
    return n.domain.empty() && n.op_type == op && n.outputs.size() == 1;
  }

  const Graph& graph_;
  std::map<std::string, std::vector<size_t>> readers_;
  std::map<std::string, size_t> producer_;
};

/// True when `value`'s declared type is `dtype` with the given known dims.
bool has_type(const Graph& graph, const std::string& value, const std::vector<int64_t>& dims,
              DType dtype = DType::Float32);

/// A node of the rewrite domain, `op`, reading `inputs`, with `last`'s name and outputs.
Node fused_node(const Node& last, const char* op, std::vector<std::string> inputs);

/// The activation attribute for a node that applies `n` to its input, or empty: Relu, Sigmoid,
/// and Gelu in its erf form (this pass's Gelu, or ai.onnx Gelu-20 without approximation).
std::string activation_of(const Node& n);

/// A pattern: the fusion starting at node i, if any.
using Pattern = std::optional<Fusion> (*)(const Matcher&, size_t);

/// Whether a fusion's node may be used in `graph` (empty: every one may): a backend keeps only
/// the fused nodes it has kernels for.
using FusedNodeFilter = std::function<bool(const Graph& graph, const Node& fused)>;

/// Every fusion `pattern` finds whose fused node `keep` accepts, none sharing a node.
std::vector<Fusion> find_fusions(const Graph& graph, Pattern pattern,
                                 const FusedNodeFilter& keep = {});

/// `graph` with every fusion find_fusions finds applied (the rewrite domain imported), or
/// nullptr when it finds none.
std::shared_ptr<Graph> apply_fusions(const Graph& graph, Pattern pattern,
                                     const FusedNodeFilter& keep = {});

/// `graph` with each pattern's fusions applied in turn, each pass over the previous one's
/// result; nullptr when none matches.
std::shared_ptr<Graph> apply_in_turn(const Graph& graph, std::initializer_list<Pattern> patterns,
                                     const FusedNodeFilter& keep = {});

}  // namespace dprun
