#include "engine/rewrites/marked_region.h"

#include <algorithm>
#include <cctype>
#include <map>

#include "engine/rewrites/graph_patterns.h"

namespace dprun {
namespace {

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

}  // namespace

std::vector<size_t> marked_region(const Graph& g, const std::string& scope, int64_t magic,
                                  size_t table_size) {
  std::map<std::string, std::map<int64_t, size_t>> by_prefix;
  for (size_t k = 0; k < g.nodes.size(); ++k) {
    std::string prefix;
    if (!g.nodes[k].domain.empty()) continue;
    if (auto counter = region_counter(g.nodes[k], scope, prefix)) by_prefix[prefix][*counter] = k;
  }
  std::vector<size_t> found;
  int tables = 0;
  for (auto& [prefix, nodes] : by_prefix) {
    const Node& last = g.nodes[nodes.rbegin()->second];
    if (last.op_type != "Constant" || last.outputs.size() != 1) continue;
    auto table = constant_ints(g, last.outputs[0]);
    if (!table || table->size() != table_size || (*table)[0] != magic) continue;
    ++tables;
    found.clear();
    for (const auto& [counter, k] : nodes) found.push_back(k);
  }
  return tables == 1 ? found : std::vector<size_t>{};
}

std::vector<int64_t> region_table(const Graph& g, const std::vector<size_t>& region) {
  return *constant_ints(g, g.nodes[region.back()].outputs[0]);
}

bool is_region_mark(const Node& n) {
  return n.op_type == "Identity" && n.inputs.size() == 1 && n.outputs.size() == 1;
}

bool region_is_closed(const Matcher& m, const std::vector<size_t>& region,
                      const std::set<std::string>& reads, const std::set<std::string>& given) {
  const Graph& g = m.graph();
  const std::set<size_t> inside(region.begin(), region.end());
  std::set<std::string> produced;
  for (size_t k : region)
    for (const auto& out : g.nodes[k].outputs) produced.insert(out);
  for (size_t k : region) {
    const Node& n = g.nodes[k];
    if (!n.domain.empty() || n.outputs.empty()) return false;
    for (const auto& in : n.inputs)
      if (!in.empty() && !produced.count(in) && !reads.count(in)) return false;
    for (const auto& out : n.outputs) {
      if (out.empty() || given.count(out)) continue;
      if (is_graph_result(g, out)) return false;
      for (size_t reader : m.readers(out))
        if (!inside.count(reader)) return false;
    }
  }
  return true;
}

}  // namespace dprun
