#include "engine/backends/cpu/layout_rewrite.h"

#include <algorithm>
#include <functional>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "engine/op_facts.h"
#include "engine/rewrites/graph_patterns.h"

namespace dprun {
namespace {

const std::vector<int64_t> kToNhwc = {0, 2, 3, 1};
const std::vector<int64_t> kToNchw = {0, 3, 1, 2};

bool single_output(const Node& node) {
  for (size_t i = 1; i < node.outputs.size(); ++i)
    if (!node.outputs[i].empty()) return false;
  return !node.outputs.empty() && !node.outputs[0].empty();
}

/// The op's layout rule (engine/layout_rule.h), registered in its facts beside its kernels.
const LayoutRule& layout_rule(const Node& node) {
  return op_facts(node).layout;
}

/// How many leading inputs of a rewritten node are NHWC: all of them or input 0.
size_t layout_input_count(const Node& node) {
  return layout_rule(node).all_inputs ? node.inputs.size() : 1;
}

/// True when node `n` can run on NHWC data, given which values are NHWC already.
bool runs_in_nhwc(const Graph& graph, const Node& n,
                  const std::function<bool(const std::string&)>& is_nhwc) {
  if (!n.domain.empty() || n.inputs.empty() || !single_output(n)) return false;
  const LayoutRule& rule = layout_rule(n);
  return rule.runs_in_nhwc != nullptr && rule.runs_in_nhwc({graph, n, is_nhwc});
}

/// Pass 1: which nodes run in NHWC, in graph order (a node's NHWC inputs come from earlier ones).
std::vector<bool> choose_nhwc_nodes(const Graph& graph) {
  std::set<std::string> nhwc;  // values produced in NHWC
  auto is_nhwc = [&](const std::string& v) { return !v.empty() && nhwc.count(v) != 0; };
  std::vector<bool> rewritten(graph.nodes.size(), false);
  for (size_t i = 0; i < graph.nodes.size(); ++i) {
    if (!runs_in_nhwc(graph, graph.nodes[i], is_nhwc)) continue;
    rewritten[i] = true;
    nhwc.insert(graph.nodes[i].outputs[0]);
  }
  return rewritten;
}

/// Pass 2: values that must exist in NCHW under their original names: read by an unchanged node
/// (or by a rewritten node at a non-layout input such as Clip's bounds), by a subgraph, as a
/// graph output or by a state update.
std::set<std::string> values_needed_in_nchw(const Graph& graph,
                                            const std::vector<bool>& rewritten) {
  std::set<std::string> need;
  for (size_t i = 0; i < graph.nodes.size(); ++i) {
    const Node& n = graph.nodes[i];
    for (const auto& s : implicit_inputs(n)) need.insert(s);
    for (size_t k = rewritten[i] ? layout_input_count(n) : 0; k < n.inputs.size(); ++k)
      need.insert(n.inputs[k]);
  }
  for (const auto& v : graph.outputs) need.insert(v.name);
  for (const auto& [value, param] : graph.state_updates) {
    need.insert(value);
    need.insert(param);
  }
  return need;
}

/// Nodes a Conv or BatchNormalization absorbs, the attributes that tell its NHWC kernel what to
/// apply, and the value the fused node produces.
struct Fusion {
  std::vector<size_t> absorbed;
  std::map<std::string, Attribute> attributes;
  std::string output;
};

/// The activation attributes for Relu, Sigmoid, or Clip with bounds known at compile time.
std::optional<std::map<std::string, Attribute>> single_activation(const Graph& graph,
                                                                  const Node& n) {
  if ((n.op_type == "Relu" || n.op_type == "Sigmoid") && only_first_input(n))
    return {{{"activation", Attribute::of_string(n.op_type)}}};
  if (n.op_type != "Clip") return std::nullopt;
  float lo = -std::numeric_limits<float>::infinity(), hi = std::numeric_limits<float>::infinity();
  if (n.has_attr("min") || n.has_attr("max")) {  // Clip before opset 11
    lo = n.attr_float("min", lo);
    hi = n.attr_float("max", hi);
  }
  for (size_t k = 1; k < n.inputs.size() && k < 3; ++k) {
    if (n.inputs[k].empty()) continue;
    auto v = constant_scalar(graph, n.inputs[k]);
    if (!v) return std::nullopt;
    (k == 1 ? lo : hi) = *v;
  }
  if (!(lo <= hi)) return std::nullopt;  // Clip's min > max rule stays with the Clip kernel
  return {{{"activation", Attribute::of_string("Clip")},
           {"activation_min", Attribute::of_float(lo)},
           {"activation_max", Attribute::of_float(hi)}}};
}

/// Pass 3: activations that a Conv (as oneDNN post-ops) or an inference BatchNormalization
/// applies itself, saving a pass over the activations each: a Relu, Sigmoid or constant-bound
/// Clip that is the producer's only reader, and SiLU, y * Sigmoid(y), where the Sigmoid and the
/// Mul are y's only readers. Every absorbed value must be NHWC only (needed in NCHW by nothing)
/// and read by nothing else.
std::map<size_t, Fusion> plan_fusions(const Graph& graph, const std::vector<bool>& rewritten,
                                      const std::set<std::string>& need_nchw) {
  std::map<std::string, std::vector<size_t>> readers = value_readers(graph);
  auto private_value = [&](const std::string& v, size_t count) {
    return !need_nchw.count(v) && readers[v].size() == count;
  };
  std::map<size_t, Fusion> fusions;
  for (size_t i = 0; i < graph.nodes.size(); ++i) {
    if (!rewritten[i] || !layout_rule(graph.nodes[i]).absorbs_activation) continue;
    const std::string& y = graph.nodes[i].outputs[0];
    if (private_value(y, 1)) {
      const size_t j = readers[y][0];
      const Node& a = graph.nodes[j];
      if (!rewritten[j] || a.inputs[0] != y) continue;
      if (auto attrs = single_activation(graph, a))
        fusions[i] = {.absorbed = {j}, .attributes = *attrs, .output = a.outputs[0]};
    } else if (private_value(y, 2)) {
      size_t s = readers[y][0], m = readers[y][1];
      if (graph.nodes[s].op_type != "Sigmoid") std::swap(s, m);
      const Node& sig = graph.nodes[s];
      const Node& mul = graph.nodes[m];
      if (!rewritten[s] || !rewritten[m] || sig.op_type != "Sigmoid" || mul.op_type != "Mul" ||
          !private_value(sig.outputs[0], 1) || readers[sig.outputs[0]][0] != m)
        continue;
      const bool operands = (mul.inputs[0] == y && mul.inputs[1] == sig.outputs[0]) ||
                            (mul.inputs[1] == y && mul.inputs[0] == sig.outputs[0]);
      if (operands)
        fusions[i] = {.absorbed = {s, m},
                      .attributes = {{"activation", Attribute::of_string("Swish")}},
                      .output = mul.outputs[0]};
    }
  }
  return fusions;
}

Node make_transpose(const std::string& name, const std::string& in, const std::string& out,
                    const std::vector<int64_t>& perm) {
  Node t;
  t.name = name;
  t.op_type = "Transpose";
  t.inputs = {in};
  t.outputs = {out};
  t.attributes["perm"] = Attribute::of_ints(perm);
  return t;
}

Node make_constant(const std::string& name, const std::string& out, Tensor value) {
  Node c;
  c.name = name;
  c.op_type = "Constant";
  c.outputs = {out};
  c.attributes["value"] = Attribute::of_tensor(std::move(value));
  return c;
}

/// Pass 4: writes the rewritten graph. NHWC values get fresh names ("nhwc/" + the original),
/// so every original name keeps its original type; Transposes convert at the chain borders.
class Emitter {
 public:
  explicit Emitter(const Graph& graph) : graph_(graph) {
    for (const auto& v : graph.inputs) used_.insert(v.name);
    for (const auto& v : graph.outputs) used_.insert(v.name);
    for (const auto& [name, t] : graph.initializers) used_.insert(name);
    for (const auto& [name, t] : graph.value_types) used_.insert(name);
    for (const Node& n : graph.nodes) {
      used_.insert(n.name);
      for (const auto& s : n.inputs) used_.insert(s);
      for (const auto& s : n.outputs) used_.insert(s);
    }
  }

  std::shared_ptr<Graph> emit(const std::vector<bool>& rewritten,
                              const std::set<std::string>& need_nchw,
                              const std::map<size_t, Fusion>& fusions) {
    std::set<size_t> absorbed;
    for (const auto& [conv, fusion] : fusions)
      absorbed.insert(fusion.absorbed.begin(), fusion.absorbed.end());
    for (size_t i = 0; i < graph_.nodes.size(); ++i)
      if (rewritten[i]) nhwc_.insert(graph_.nodes[i].outputs[0]);
    out_ = std::make_shared<Graph>(graph_);
    out_->nodes.clear();
    out_->opset_imports[kRewriteDomain] = 1;
    for (size_t i = 0; i < graph_.nodes.size(); ++i) {
      const Node& n = graph_.nodes[i];
      if (!rewritten[i]) {
        out_->nodes.push_back(n);
        continue;
      }
      if (absorbed.count(i)) continue;  // applied by the node that produces its input
      auto fusion = fusions.find(i);
      const std::string y = fusion == fusions.end() ? n.outputs[0] : fusion->second.output;
      Node m = nhwc_node(n);
      if (fusion != fusions.end())
        for (const auto& [key, attr] : fusion->second.attributes) m.attributes[key] = attr;
      m.outputs[0] = twin(y);
      out_->nodes.push_back(std::move(m));
      if (need_nchw.count(y))
        out_->nodes.push_back(make_transpose(fresh(y + "/to_nchw"), twin(y), y, kToNchw));
    }
    // Each twin is emitted just before its first reader, after the value's producer: the
    // order stays topological.
    return out_;
  }

 private:
  std::string fresh(const std::string& base) {
    std::string name = "nhwc/" + base;
    for (int k = 1; used_.count(name); ++k) name = "nhwc/" + base + "#" + std::to_string(k);
    used_.insert(name);
    return name;
  }

  /// The name of `v`'s NHWC twin.
  const std::string& twin(const std::string& v) {
    auto it = twin_.find(v);
    if (it == twin_.end()) it = twin_.emplace(v, fresh(v)).first;
    return it->second;
  }

  /// The NHWC name of a layout input, inserting a Transpose for an NCHW value on first use.
  const std::string& nhwc_input(const std::string& v) {
    if (!nhwc_.count(v) && converted_.insert(v).second)
      out_->nodes.push_back(make_transpose(fresh(v + "/to_nhwc"), v, twin(v), kToNhwc));
    return twin(v);
  }

  /// `n` with its layout inputs renamed to NHWC twins, then changed by its op's layout rule
  /// (its NHWC kernel, its layout-dependent attributes or inputs).
  Node nhwc_node(const Node& n) {
    Node m = n;
    for (size_t k = 0; k < layout_input_count(n); ++k)
      if (!n.inputs[k].empty()) m.inputs[k] = nhwc_input(n.inputs[k]);
    if (auto to_nhwc = layout_rule(n).to_nhwc) {
      LayoutEdit edit{graph_, m, [&](size_t input, const std::string& what, Tensor value) {
                        // A new Constant, not an initializer: those are the model's parameters.
                        m.inputs[input] = fresh(n.inputs[input]);
                        out_->nodes.push_back(make_constant(fresh(n.name + "/" + what),
                                                            m.inputs[input], std::move(value)));
                      }};
      to_nhwc(edit);
    }
    return m;
  }

  const Graph& graph_;
  std::shared_ptr<Graph> out_;
  std::set<std::string> used_;               // every name in use, so new ones are unique
  std::set<std::string> nhwc_;               // original values produced in NHWC
  std::map<std::string, std::string> twin_;  // original value -> its NHWC twin's name
  std::set<std::string> converted_;          // NCHW values whose Transpose was emitted
};

}  // namespace

std::shared_ptr<Graph> rewrite_channels_last(const Graph& graph) {
  const std::vector<bool> rewritten = choose_nhwc_nodes(graph);
  if (std::find(rewritten.begin(), rewritten.end(), true) == rewritten.end()) return nullptr;
  const std::set<std::string> need_nchw = values_needed_in_nchw(graph, rewritten);
  const std::map<size_t, Fusion> fusions = plan_fusions(graph, rewritten, need_nchw);
  return Emitter(graph).emit(rewritten, need_nchw, fusions);
}

}  // namespace dprun
