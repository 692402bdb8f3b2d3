#include "engine/rewrites/rnn_grad_fusion.h"

#include <algorithm>
#include <cctype>
#include <map>
#include <set>
#include <string>

#include "engine/rewrites/graph_patterns.h"
#include "engine/rewrites/marked_region.h"

namespace dprun {
namespace {

std::string lowercase(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char ch) { return std::tolower(ch); });
  return s;
}

// The region's boundary, from its table and its first and last nodes.
struct Boundary {
  std::vector<std::string> received = {"", "", ""};              // gradients of Y, Y_h, Y_c
  std::vector<std::string> given = std::vector<std::string>(8);  // gradients of the inputs
  std::set<std::string> reads;  // what the region may read: the forward inputs and received
};

std::optional<Boundary> boundary_of(const Graph& g, const Node& fwd,
                                    const std::vector<size_t>& nodes) {
  const std::vector<int64_t> table = region_table(g, nodes);
  if (table[1] != kRnnGradVersion) return std::nullopt;
  Boundary b;
  size_t first = 0, last = nodes.size() - 1;  // next entry Identity; the table
  for (size_t k = 0; k < 3; ++k) {
    if (table[2 + k] == 0) continue;
    if (k >= fwd.outputs.size() || fwd.outputs[k].empty() || first >= last) return std::nullopt;
    const Node& n = g.nodes[nodes[first++]];
    if (!is_region_mark(n)) return std::nullopt;
    b.received[k] = n.inputs[0];
  }
  std::vector<size_t> given;
  for (size_t k = 0; k < 8; ++k)
    if (table[5 + k] != 0) given.push_back(k);
  if (given.size() > last - first) return std::nullopt;
  size_t at = last - given.size();
  for (size_t k : given) {
    const Node& n = g.nodes[nodes[at++]];
    if (k == 4 || k >= fwd.inputs.size() || fwd.inputs[k].empty() || !is_region_mark(n))
      return std::nullopt;
    b.given[k] = n.outputs[0];
  }
  for (const auto& v : fwd.inputs)
    if (!v.empty()) b.reads.insert(v);
  for (const auto& v : b.received)
    if (!v.empty()) b.reads.insert(v);
  return b;
}

}  // namespace

std::string rnn_grad_op(const std::string& forward_op) {
  return forward_op + "Grad";
}

std::optional<std::vector<bool>> rnn_relu_per_direction(const Node& node, const std::string& op) {
  std::vector<std::string> defaults = {"sigmoid", "tanh", "tanh"};
  if (op == "GRU") defaults = {"sigmoid", "tanh"};
  if (op == "RNN") defaults = {"tanh"};
  const std::string dir = node.attr_string("direction", "forward");
  if (dir != "forward" && dir != "reverse" && dir != "bidirectional") return std::nullopt;
  const int64_t layout = node.attr_int("layout", 0);
  if ((layout != 0 && layout != 1) || node.has_attr("clip") ||
      node.attr_int("input_forget", 0) != 0)
    return std::nullopt;
  std::vector<bool> relu(dir == "bidirectional" ? 2 : 1, false);
  std::vector<std::string> names;
  if (node.has_attr("activations")) names = node.attr_strings("activations");
  if (names.empty()) return relu;
  if (relu.size() == 2 && names.size() == defaults.size()) {  // one list serves both
    const std::vector<std::string> once = names;
    names.insert(names.end(), once.begin(), once.end());
  }
  if (names.size() != defaults.size() * relu.size()) return std::nullopt;
  for (size_t k = 0; k < names.size(); ++k) {
    const std::string name = lowercase(names[k]);
    if (name == defaults[k % defaults.size()]) continue;
    if (op != "RNN" || name != "relu") return std::nullopt;
    relu[k] = true;
  }
  return relu;
}

std::optional<Fusion> match_rnn_grad(const Matcher& m, size_t i) {
  const Graph& g = m.graph();
  const Node& fwd = g.nodes[i];
  if (!fwd.domain.empty() ||
      (fwd.op_type != "LSTM" && fwd.op_type != "GRU" && fwd.op_type != "RNN") || fwd.name.empty() ||
      fwd.inputs.size() < 3 || fwd.inputs.size() > 8 || !rnn_relu_per_direction(fwd, fwd.op_type))
    return std::nullopt;
  auto x_type = g.type_of(fwd.inputs[0]);
  if (!x_type || x_type->dtype != DType::Float32) return std::nullopt;
  const std::vector<size_t> nodes = marked_region(g, fwd.name, kRnnGradMagic, 13);
  if (nodes.empty()) return std::nullopt;
  auto b = boundary_of(g, fwd, nodes);
  if (!b || !region_is_closed(m, nodes, b->reads,
                              std::set<std::string>(b->given.begin(), b->given.end())))
    return std::nullopt;

  Node fused;
  fused.name = fwd.name + "/grad";
  fused.domain = kRewriteDomain;
  fused.op_type = rnn_grad_op(fwd.op_type);
  fused.attributes = fwd.attributes;
  fused.inputs = fwd.inputs;
  fused.inputs.resize(8);
  fused.inputs.insert(fused.inputs.end(), b->received.begin(), b->received.end());
  fused.outputs = b->given;
  while (!fused.outputs.empty() && fused.outputs.back().empty()) fused.outputs.pop_back();
  if (fused.outputs.empty()) return std::nullopt;
  return Fusion{nodes, fused};
}

}  // namespace dprun
