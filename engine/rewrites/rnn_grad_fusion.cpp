#include "engine/rewrites/rnn_grad_fusion.h"

#include <algorithm>
#include <cctype>
#include <map>
#include <set>
#include <string>

#include "engine/rewrites/graph_patterns.h"

namespace dprun {
namespace {

std::string lowercase(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char ch) { return std::tolower(ch); });
  return s;
}

// The counter of a node named <prefix><scope>/<op type>_<counter>, with the prefix in
// `prefix`; nullopt for any other name.
std::optional<int64_t> region_counter(const Node& n, const std::string& scope,
                                      std::string& prefix) {
  const std::string& name = n.name;
  const size_t underscore = name.rfind('_');
  if (underscore == std::string::npos || underscore + 1 == name.size()) return std::nullopt;
  const std::string digits = name.substr(underscore + 1);
  if (digits.size() > 18 ||
      !std::all_of(digits.begin(), digits.end(), [](unsigned char c) { return std::isdigit(c); }))
    return std::nullopt;
  const std::string tail = scope + "/" + n.op_type;
  if (underscore < tail.size() || name.compare(underscore - tail.size(), tail.size(), tail) != 0)
    return std::nullopt;
  prefix = name.substr(0, underscore - tail.size());
  return std::stoll(digits);
}

// The region's nodes by counter, for the one prefix whose table is found; empty when there is
// not exactly one such table.
std::map<int64_t, size_t> region_of(const Graph& g, const std::string& scope) {
  std::map<std::string, std::map<int64_t, size_t>> by_prefix;
  for (size_t k = 0; k < g.nodes.size(); ++k) {
    std::string prefix;
    if (!g.nodes[k].domain.empty()) continue;
    if (auto counter = region_counter(g.nodes[k], scope, prefix)) by_prefix[prefix][*counter] = k;
  }
  std::map<int64_t, size_t> found;
  int tables = 0;
  for (auto& [prefix, nodes] : by_prefix) {
    const Node& last = g.nodes[nodes.rbegin()->second];
    if (last.op_type != "Constant" || last.outputs.size() != 1) continue;
    auto table = constant_ints(g, last.outputs[0]);
    if (!table || table->size() != 13 || (*table)[0] != kRnnGradMagic) continue;
    ++tables;
    found = std::move(nodes);
  }
  return tables == 1 ? found : std::map<int64_t, size_t>{};
}

// The region's boundary, from its table and its first and last nodes.
struct Boundary {
  std::vector<std::string> received = {"", "", ""};              // gradients of Y, Y_h, Y_c
  std::vector<std::string> given = std::vector<std::string>(8);  // gradients of the inputs
  std::set<std::string> reads;  // what the region may read: the forward inputs and received
};

bool is_identity(const Node& n) {
  return n.op_type == "Identity" && n.inputs.size() == 1 && n.outputs.size() == 1;
}

std::optional<Boundary> boundary_of(const Graph& g, const Node& fwd,
                                    const std::vector<size_t>& nodes) {
  const std::vector<int64_t> table = *constant_ints(g, g.nodes[nodes.back()].outputs[0]);
  if (table[1] != kRnnGradVersion) return std::nullopt;
  Boundary b;
  size_t first = 0, last = nodes.size() - 1;  // next entry Identity; the table
  for (size_t k = 0; k < 3; ++k) {
    if (table[2 + k] == 0) continue;
    if (k >= fwd.outputs.size() || fwd.outputs[k].empty() || first >= last) return std::nullopt;
    const Node& n = g.nodes[nodes[first++]];
    if (!is_identity(n)) return std::nullopt;
    b.received[k] = n.inputs[0];
  }
  std::vector<size_t> given;
  for (size_t k = 0; k < 8; ++k)
    if (table[5 + k] != 0) given.push_back(k);
  if (given.size() > last - first) return std::nullopt;
  size_t at = last - given.size();
  for (size_t k : given) {
    const Node& n = g.nodes[nodes[at++]];
    if (k == 4 || k >= fwd.inputs.size() || fwd.inputs[k].empty() || !is_identity(n))
      return std::nullopt;
    b.given[k] = n.outputs[0];
  }
  for (const auto& v : fwd.inputs)
    if (!v.empty()) b.reads.insert(v);
  for (const auto& v : b.received)
    if (!v.empty()) b.reads.insert(v);
  return b;
}

// True when the region reads only its boundary and its own results, and nothing outside it
// reads a result of it but the given gradients.
bool closed(const Matcher& m, const std::vector<size_t>& nodes, const Boundary& b) {
  const Graph& g = m.graph();
  const std::set<size_t> inside(nodes.begin(), nodes.end());
  std::set<std::string> produced;
  for (size_t k : nodes)
    for (const auto& out : g.nodes[k].outputs) produced.insert(out);
  const std::set<std::string> given(b.given.begin(), b.given.end());
  for (size_t k : nodes) {
    const Node& n = g.nodes[k];
    if (!n.domain.empty() || n.outputs.empty()) return false;
    for (const auto& in : n.inputs)
      if (!in.empty() && !produced.count(in) && !b.reads.count(in)) return false;
    for (const auto& out : n.outputs) {
      if (out.empty() || given.count(out)) continue;
      if (is_graph_result(g, out)) return false;
      for (size_t reader : m.readers(out))
        if (!inside.count(reader)) return false;
    }
  }
  return true;
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
  const std::map<int64_t, size_t> region = region_of(g, fwd.name);
  if (region.empty()) return std::nullopt;
  std::vector<size_t> nodes;
  for (const auto& [counter, k] : region) nodes.push_back(k);
  auto b = boundary_of(g, fwd, nodes);
  if (!b || !closed(m, nodes, *b)) return std::nullopt;

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
