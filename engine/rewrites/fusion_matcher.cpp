#include "engine/rewrites/fusion_matcher.h"

#include <algorithm>
#include <cmath>
#include <set>

namespace dprun {

bool Matcher::is_constant_near(const std::string& value, double want) const {
  auto v = floating_scalar(graph_, value);
  return v && std::abs(*v - want) <= 1e-5 * std::abs(want);
}

bool has_type(const Graph& graph, const std::string& value, const std::vector<int64_t>& dims,
              DType dtype) {
  auto t = graph.type_of(value);
  if (!t || t->dtype != dtype || !t->shape || t->shape->size() != dims.size()) return false;
  for (size_t i = 0; i < dims.size(); ++i)
    if (!(*t->shape)[i].is_known() || (*t->shape)[i].value != dims[i]) return false;
  return true;
}

Node fused_node(const Node& last, const char* op, std::vector<std::string> inputs) {
  Node n;
  n.name = last.name;
  n.op_type = op;
  n.domain = kRewriteDomain;
  n.inputs = std::move(inputs);
  n.outputs = last.outputs;
  return n;
}

std::vector<Fusion> find_fusions(const Graph& graph, Pattern pattern, const FusedNodeFilter& keep) {
  const Matcher matcher(graph);
  std::vector<Fusion> fusions;
  std::set<size_t> taken;
  for (size_t i = 0; i < graph.nodes.size(); ++i) {
    std::optional<Fusion> f = pattern(matcher, i);
    if (!f || (keep && !keep(graph, f->fused))) continue;
    bool free = true;
    for (size_t k : f->nodes) free = free && !taken.count(k);
    if (!free) continue;
    taken.insert(f->nodes.begin(), f->nodes.end());
    fusions.push_back(std::move(*f));
  }
  return fusions;
}

std::shared_ptr<Graph> apply_fusions(const Graph& graph, Pattern pattern,
                                     const FusedNodeFilter& keep) {
  const std::vector<Fusion> fusions = find_fusions(graph, pattern, keep);
  if (fusions.empty()) return nullptr;
  std::map<size_t, const Fusion*> replaced_by;  // a chain's last node -> its fusion
  std::set<size_t> removed;
  for (const Fusion& f : fusions) {
    size_t last = 0;
    for (size_t k : f.nodes) last = std::max(last, k);
    replaced_by[last] = &f;
    removed.insert(f.nodes.begin(), f.nodes.end());
  }
  auto out = std::make_shared<Graph>(graph);
  out->nodes.clear();
  out->opset_imports[kRewriteDomain] = 1;
  bool several_outputs = false;
  for (size_t i = 0; i < graph.nodes.size(); ++i) {
    if (auto it = replaced_by.find(i); it != replaced_by.end()) {
      out->nodes.insert(out->nodes.end(), it->second->before.begin(), it->second->before.end());
      out->nodes.push_back(it->second->fused);
      several_outputs = several_outputs || it->second->fused.outputs.size() > 1;
    } else if (!removed.count(i))
      out->nodes.push_back(graph.nodes[i]);
  }
  if (several_outputs) out->sort_topologically();
  return out;
}

std::shared_ptr<Graph> apply_in_turn(const Graph& graph, std::initializer_list<Pattern> patterns,
                                     const FusedNodeFilter& keep) {
  std::shared_ptr<Graph> result;
  for (Pattern pattern : patterns)
    if (std::shared_ptr<Graph> next = apply_fusions(result ? *result : graph, pattern, keep))
      result = next;
  return result;
}

std::string activation_of(const Node& n) {
  if (n.inputs.size() != 1 || n.outputs.size() != 1) return "";
  if (n.domain.empty() && (n.op_type == "Relu" || n.op_type == "Sigmoid")) return n.op_type;
  if (n.op_type == "Gelu" && (n.domain == kRewriteDomain || n.domain.empty()) &&
      n.attr_string("approximate", "none") == "none")
    return "Gelu";
  return "";
}

}  // namespace dprun
