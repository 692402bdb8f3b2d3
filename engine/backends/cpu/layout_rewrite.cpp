#include "engine/backends/cpu/layout_rewrite.h"

#include <limits>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace dprun {
namespace {

const std::vector<int64_t> kToNhwc = {0, 2, 3, 1};
const std::vector<int64_t> kToNchw = {0, 3, 1, 2};

bool is_unary_agnostic(const Node& node) {
  static const std::set<std::string> ops = {"Relu",        "Clip",      "LeakyRelu", "Sigmoid",
                                            "HardSigmoid", "HardSwish", "Tanh",      "Elu",
                                            "Selu",        "Softplus",  "Identity",  "Dropout"};
  return node.domain.empty() && ops.count(node.op_type);
}

bool is_binary_agnostic(const Node& node) {
  return node.domain.empty() && (node.op_type == "Add" || node.op_type == "Mul" ||
                                 node.op_type == "Sub" || node.op_type == "Div");
}

bool known_rank4_float(const Graph& graph, const std::string& value) {
  auto t = graph.type_of(value);
  return t && t->dtype == DType::Float32 && t->shape && t->shape->size() == 4;
}

bool is_scalar(const Graph& graph, const std::string& value) {
  if (value.empty()) return true;
  auto t = graph.type_of(value);
  return t && t->shape && t->shape->empty();
}

/// Both shapes fully known to be equal (same sizes or the same named symbol per dim).
bool same_shape(const Graph& graph, const std::string& a, const std::string& b) {
  if (a == b) return true;
  auto ta = graph.type_of(a), tb = graph.type_of(b);
  if (!ta || !tb || !ta->shape || !tb->shape || ta->shape->size() != tb->shape->size())
    return false;
  for (size_t i = 0; i < ta->shape->size(); ++i) {
    const Dim& x = (*ta->shape)[i];
    const Dim& y = (*tb->shape)[i];
    if (x.is_known() && y.is_known() && x.value == y.value) continue;
    if (!x.is_known() && !y.is_known() && !x.symbol.empty() && x.symbol == y.symbol) continue;
    return false;
  }
  return true;
}

/// Inputs other than input 0 must be absent (Dropout with a ratio or training flag may draw a
/// layout-dependent mask; those stay in NCHW).
bool only_first_input(const Node& node) {
  for (size_t i = 1; i < node.inputs.size(); ++i)
    if (!node.inputs[i].empty()) return false;
  return true;
}

bool single_output(const Node& node) {
  for (size_t i = 1; i < node.outputs.size(); ++i)
    if (!node.outputs[i].empty()) return false;
  return !node.outputs.empty() && !node.outputs[0].empty();
}

/// How many leading inputs of a rewritten node are NHWC: all of them for binary ops and
/// Concat, else input 0 (weights, bias and Clip bounds keep their layout).
size_t layout_input_count(const Node& node) {
  return (is_binary_agnostic(node) || node.op_type == "Concat") ? node.inputs.size() : 1;
}

/// The value of a float32 scalar known when the graph is compiled (an initializer that
/// callers cannot override, or a Constant node's output), or nullopt.
std::optional<float> constant_scalar(const Graph& graph, const std::string& value) {
  bool overridable = false;
  for (const auto& in : graph.inputs) overridable = overridable || in.name == value;
  if (auto it = graph.initializers.find(value); it != graph.initializers.end() && !overridable) {
    const Tensor& t = it->second;
    if (t.dtype() == DType::Float32 && t.numel() == 1) return t.data<float>()[0];
    return std::nullopt;
  }
  for (const Node& n : graph.nodes)
    if (n.op_type == "Constant" && n.domain.empty() && n.outputs.size() == 1 &&
        n.outputs[0] == value) {
      const Attribute* a = n.find_attr("value");
      if (a && a->kind == Attribute::Kind::Tensor && a->t.dtype() == DType::Float32 &&
          a->t.numel() == 1)
        return a->t.data<float>()[0];
    }
  return std::nullopt;
}

/// The activation a ConvNHWC applies to its output instead of a separate Relu or Clip node
/// (oneDNN runs it as a post-op, saving a pass over the activations), or nullopt.
std::optional<std::map<std::string, Attribute>> fusable_activation(const Graph& graph,
                                                                   const Node& n) {
  auto text = [](std::string s) {
    Attribute a;
    a.kind = Attribute::Kind::String;
    a.s = std::move(s);
    return a;
  };
  auto number = [](float f) {
    Attribute a;
    a.kind = Attribute::Kind::Float;
    a.f = f;
    return a;
  };
  if (n.op_type == "Relu" && only_first_input(n)) return {{{"activation", text("Relu")}}};
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
  return {{{"activation", text("Clip")},
           {"activation_min", number(lo)},
           {"activation_max", number(hi)}}};
}

Node make_transpose(const std::string& name, const std::string& in, const std::string& out,
                    const std::vector<int64_t>& perm) {
  Node t;
  t.name = name;
  t.op_type = "Transpose";
  t.inputs = {in};
  t.outputs = {out};
  Attribute a;
  a.kind = Attribute::Kind::Ints;
  a.ints = perm;
  t.attributes["perm"] = a;
  return t;
}

}  // namespace

std::shared_ptr<Graph> rewrite_channels_last(const Graph& graph) {
  // Every name in use, so the inserted ones are unique.
  std::set<std::string> used;
  for (const auto& v : graph.inputs) used.insert(v.name);
  for (const auto& v : graph.outputs) used.insert(v.name);
  for (const auto& [name, t] : graph.initializers) used.insert(name);
  for (const auto& [name, t] : graph.value_types) used.insert(name);
  for (const Node& n : graph.nodes) {
    used.insert(n.name);
    for (const auto& s : n.inputs) used.insert(s);
    for (const auto& s : n.outputs) used.insert(s);
  }
  auto fresh = [&](const std::string& base) {
    std::string name = "nhwc/" + base;
    for (int k = 1; used.count(name); ++k) name = "nhwc/" + base + "#" + std::to_string(k);
    used.insert(name);
    return name;
  };
  std::map<std::string, std::string> nhwc_name;  // original value -> its NHWC twin's name
  auto twin = [&](const std::string& v) -> const std::string& {
    auto it = nhwc_name.find(v);
    if (it == nhwc_name.end()) it = nhwc_name.emplace(v, fresh(v)).first;
    return it->second;
  };

  // Pass 1: decide which nodes run in NHWC; `nhwc` holds values produced in NHWC.
  std::set<std::string> nhwc;
  std::vector<int> kind(graph.nodes.size(), 0);  // 0 unchanged, 1 rewritten
  auto is_nhwc = [&](const std::string& v) { return !v.empty() && nhwc.count(v); };
  for (size_t i = 0; i < graph.nodes.size(); ++i) {
    const Node& n = graph.nodes[i];
    bool take = false;
    if (!n.domain.empty() || n.inputs.empty() || !single_output(n)) continue;
    const std::string& x = n.inputs[0];
    if (n.op_type == "Conv") {
      auto w =
          n.inputs.size() > 1 ? graph.initializers.find(n.inputs[1]) : graph.initializers.end();
      take = w != graph.initializers.end() && w->second.dtype() == DType::Float32 &&
             w->second.rank() == 4 && (is_nhwc(x) || known_rank4_float(graph, x));
    } else if (n.op_type == "MaxPool" || n.op_type == "AveragePool") {
      take = is_nhwc(x) && n.attr_ints("kernel_shape", {}).size() == 2 && only_first_input(n);
    } else if (n.op_type == "GlobalAveragePool") {
      take = is_nhwc(x);
    } else if (n.op_type == "BatchNormalization") {
      // Inference form only (one output): a per-channel scale and shift by initializers.
      // Training mode and the per-activation form (spatial = 0) stay in NCHW.
      take = is_nhwc(x) && n.inputs.size() == 5 && n.attr_int("training_mode", 0) == 0 &&
             n.attr_int("spatial", 1) == 1;
      for (size_t k = 1; take && k < 5; ++k) {
        auto it = graph.initializers.find(n.inputs[k]);
        take = it != graph.initializers.end() && it->second.rank() == 1;
      }
    } else if (is_unary_agnostic(n)) {
      take = is_nhwc(x);
      if (n.op_type == "Clip") {
        auto bound_ok = [&](size_t k) {
          return n.inputs.size() <= k || is_scalar(graph, n.inputs[k]) ||
                 constant_scalar(graph, n.inputs[k]).has_value();
        };
        take = take && bound_ok(1) && bound_ok(2);
      } else
        take = take && only_first_input(n);
    } else if (is_binary_agnostic(n)) {
      // NHWC values are all 4-D, and broadcasting between two 4-D operands works per
      // dimension, so it commutes with permuting both. The legacy (opset < 7) `broadcast`
      // attribute aligns dims by `axis`: those only with equal shapes.
      take = n.inputs.size() == 2 && is_nhwc(x) && is_nhwc(n.inputs[1]) &&
             (!n.has_attr("broadcast") || same_shape(graph, x, n.inputs[1]));
    } else if (n.op_type == "Concat") {
      take = true;
      for (const auto& in : n.inputs) take = take && is_nhwc(in);
    }
    if (!take) continue;
    kind[i] = 1;
    nhwc.insert(n.outputs[0]);
  }
  bool any = false;
  for (int k : kind) any = any || k;
  if (!any) return nullptr;

  // Values that must exist in NCHW under their original names: read by an unchanged node (or
  // by a rewritten node at a non-layout input such as Clip's bounds), by a subgraph, as a
  // graph output or by a state update.
  std::set<std::string> need_nchw;
  for (size_t i = 0; i < graph.nodes.size(); ++i) {
    const Node& n = graph.nodes[i];
    for (const auto& s : implicit_inputs(n)) need_nchw.insert(s);
    for (size_t k = kind[i] ? layout_input_count(n) : 0; k < n.inputs.size(); ++k)
      need_nchw.insert(n.inputs[k]);
  }
  for (const auto& v : graph.outputs) need_nchw.insert(v.name);
  for (const auto& [value, param] : graph.state_updates) {
    need_nchw.insert(value);
    need_nchw.insert(param);
  }

  // Conv followed by its only reader, a rewritten Relu or Clip with constant bounds: the Conv
  // applies the activation itself and the activation node goes away.
  std::map<std::string, int> readers;
  for (const Node& n : graph.nodes) {
    for (const auto& in : n.inputs) ++readers[in];
    for (const auto& in : implicit_inputs(n)) ++readers[in];
  }
  std::map<size_t, size_t> fused;  // Conv node -> activation node
  std::set<size_t> absorbed;
  for (size_t i = 0; i < graph.nodes.size(); ++i) {
    if (!kind[i] || graph.nodes[i].op_type != "Conv") continue;
    const std::string& y = graph.nodes[i].outputs[0];
    if (need_nchw.count(y) || readers[y] != 1) continue;
    for (size_t j = i + 1; j < graph.nodes.size(); ++j) {
      const Node& a = graph.nodes[j];
      if (a.inputs.empty() || a.inputs[0] != y) continue;
      if (kind[j] && fusable_activation(graph, a)) {
        fused[i] = j;
        absorbed.insert(j);
      }
      break;
    }
  }

  auto out = std::make_shared<Graph>(graph);
  out->nodes.clear();
  out->opset_imports[kLayoutDomain] = 1;
  std::set<std::string> have_twin;  // NCHW values whose NHWC twin was emitted
  auto ensure_twin = [&](const std::string& v) {
    if (have_twin.insert(v).second)
      out->nodes.push_back(make_transpose(fresh(v + "/to_nhwc"), v, twin(v), kToNhwc));
  };
  for (size_t i = 0; i < graph.nodes.size(); ++i) {
    const Node& n = graph.nodes[i];
    if (!kind[i]) {
      out->nodes.push_back(n);
      continue;
    }
    if (absorbed.count(i)) continue;  // applied by the Conv before it
    Node m = n;
    for (size_t k = 0; k < layout_input_count(n); ++k) {
      const std::string& v = n.inputs[k];
      if (v.empty()) continue;
      if (!is_nhwc(v)) ensure_twin(v);
      m.inputs[k] = twin(v);
    }
    if (n.op_type == "Conv" || n.op_type == "MaxPool" || n.op_type == "AveragePool" ||
        n.op_type == "GlobalAveragePool" || n.op_type == "BatchNormalization") {
      m.op_type = n.op_type + "NHWC";
      m.domain = kLayoutDomain;
    } else if (n.op_type == "Concat") {
      int64_t axis = n.attr_int("axis", 1);
      if (axis < 0) axis += 4;
      static const int64_t to_nhwc_axis[4] = {0, 3, 1, 2};
      if (axis >= 0 && axis < 4) {
        Attribute a;
        a.kind = Attribute::Kind::Int;
        a.i = to_nhwc_axis[axis];
        m.attributes["axis"] = a;
      }  // an invalid axis is left for the Concat kernel to report
    }
    std::string y = n.outputs[0];
    if (auto f = fused.find(i); f != fused.end()) {
      const Node& activation = graph.nodes[f->second];
      const auto attrs = fusable_activation(graph, activation);
      for (const auto& [key, attr] : *attrs) m.attributes[key] = attr;
      y = activation.outputs[0];
    }
    m.outputs[0] = twin(y);
    out->nodes.push_back(std::move(m));
    if (need_nchw.count(y))
      out->nodes.push_back(make_transpose(fresh(y + "/to_nchw"), twin(y), y, kToNchw));
  }
  // Each twin is emitted just before its first reader, after the value's producer: the
  // order stays topological.
  return out;
}

}  // namespace dprun
