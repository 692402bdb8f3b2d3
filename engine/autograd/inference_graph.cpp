#include "engine/autograd/inference_graph.h"

#include <algorithm>
#include <map>
#include <set>

#include "engine/error.h"

namespace dprun {

namespace {

size_t named_outputs(const Node& node) {
  return static_cast<size_t>(std::count_if(node.outputs.begin(), node.outputs.end(),
                                           [](const std::string& o) { return !o.empty(); }));
}

bool is_onnx_op(const Node& node, const char* op_type) {
  return node.op_type == op_type && canonical_domain(node.domain).empty();
}

// Rewrites one training-mode BatchNormalization in place. `renamed` maps its running-statistic
// outputs to the running statistics themselves; `dropped` collects the outputs no longer made.
void to_inference(Node& bn, int64_t opset, std::map<std::string, std::string>& renamed,
                  std::set<std::string>& dropped) {
  for (size_t i = 1; i < bn.outputs.size(); ++i) {
    const std::string& out = bn.outputs[i];
    if (out.empty()) continue;
    // Outputs 1 and 2 are the updated running mean and variance (inputs 3 and 4).
    if (i <= 2 && bn.inputs.size() > i + 2)
      renamed[out] = bn.inputs[i + 2];
    else
      dropped.insert(out);
  }
  bn.outputs.resize(1);
  bn.attributes.erase("training_mode");
  if (opset < 7) bn.attributes["is_test"] = Attribute::of_int(1);
}

// Removes the nodes whose outputs nothing needs (the constants of a Dropout's training_mode,
// say), then the initializers nothing reads. Graph inputs stay: they are the model's signature.
void drop_unused(Graph& g) {
  g.sort_topologically();
  std::set<std::string> needed;
  for (const auto& o : g.outputs) needed.insert(o.name);
  std::vector<bool> keep(g.nodes.size(), false);
  for (size_t n = g.nodes.size(); n-- > 0;) {  // reverse topological order
    const Node& node = g.nodes[n];
    keep[n] = std::any_of(node.outputs.begin(), node.outputs.end(),
                          [&](const std::string& o) { return needed.count(o) != 0; });
    if (!keep[n]) continue;
    needed.insert(node.inputs.begin(), node.inputs.end());
    for (const std::string& v : implicit_inputs(node)) needed.insert(v);
  }
  std::vector<Node> kept;
  for (size_t n = 0; n < g.nodes.size(); ++n)
    if (keep[n]) kept.push_back(std::move(g.nodes[n]));
  g.nodes = std::move(kept);
  std::set<std::string> inputs;
  for (const auto& i : g.inputs) inputs.insert(i.name);
  std::erase_if(g.initializers, [&](const auto& entry) {
    return !needed.count(entry.first) && !inputs.count(entry.first);
  });
}

}  // namespace

bool batch_norm_in_training_mode(const Node& node, int64_t opset) {
  if (opset >= 14) return node.attr_int("training_mode", 0) != 0;
  if (opset < 7 && node.attr_int("is_test", 0) != 0) return false;
  return named_outputs(node) > 1;
}

bool dropout_may_train(const Node& node, int64_t opset) {
  return opset >= 12 && node.inputs.size() > 2 && !node.inputs[2].empty();
}

std::vector<std::string> training_mode_nodes(const Graph& graph) {
  std::vector<std::string> found;
  const int64_t opset = graph.opset_imports.count("") ? graph.opset("") : 0;
  for (const Node& node : graph.nodes)
    if ((is_onnx_op(node, "BatchNormalization") && batch_norm_in_training_mode(node, opset)) ||
        (is_onnx_op(node, "Dropout") && dropout_may_train(node, opset)))
      found.push_back(node.describe());
  return found;
}

Graph inference_graph(const Graph& forward) {
  Graph g = forward;
  const int64_t opset = g.opset_imports.count("") ? g.opset("") : 0;
  std::set<std::string> read;  // values some node reads
  for (const Node& node : g.nodes) read.insert(node.inputs.begin(), node.inputs.end());
  std::map<std::string, std::string> renamed;
  std::set<std::string> dropped;
  for (Node& node : g.nodes) {
    if (is_onnx_op(node, "BatchNormalization") && batch_norm_in_training_mode(node, opset)) {
      to_inference(node, opset, renamed, dropped);
    } else if (is_onnx_op(node, "Dropout")) {
      const bool mask_read = node.outputs.size() > 1 && read.count(node.outputs[1]);
      if (!mask_read) {
        if (node.outputs.size() > 1 && !node.outputs[1].empty()) dropped.insert(node.outputs[1]);
        node = Node{.name = node.name,
                    .op_type = "Identity",
                    .inputs = {node.inputs.at(0)},
                    .outputs = {node.outputs.at(0)}};
      } else if (opset >= 12) {
        node.inputs.resize(std::min<size_t>(node.inputs.size(), 2));
      } else if (opset < 7) {
        node.attributes["is_test"] = Attribute::of_int(1);
      }
    }
  }
  for (Node& node : g.nodes)
    for (std::string& in : node.inputs) {
      if (dropped.count(in))
        node.fail("reads '", in,
                  "', a batch statistic that only training computes: the model has no inference "
                  "form");
      if (auto it = renamed.find(in); it != renamed.end()) in = it->second;
    }
  std::erase_if(g.outputs, [&](const ValueInfo& o) {
    return dropped.count(o.name) != 0 || renamed.count(o.name) != 0;
  });
  for (const auto& [name, _] : renamed) g.value_types.erase(name);
  for (const auto& name : dropped) g.value_types.erase(name);
  g.state_updates.clear();
  drop_unused(g);
  return g;
}

}  // namespace dprun
