#include "engine/graph.h"

#include <deque>
#include <set>
#include <unordered_map>
#include <unordered_set>

namespace dprun {

namespace {
const char* kind_name(Attribute::Kind kind) {
  switch (kind) {
    case Attribute::Kind::Float:
      return "float";
    case Attribute::Kind::Int:
      return "int";
    case Attribute::Kind::String:
      return "string";
    case Attribute::Kind::Tensor:
      return "tensor";
    case Attribute::Kind::Graph:
      return "graph";
    case Attribute::Kind::Floats:
      return "floats";
    case Attribute::Kind::Ints:
      return "ints";
    case Attribute::Kind::Strings:
      return "strings";
    case Attribute::Kind::Tensors:
      return "tensors";
    case Attribute::Kind::Graphs:
      return "graphs";
  }
  return "?";
}
}  // namespace

std::string canonical_domain(const std::string& domain) {
  return domain == "ai.onnx" ? std::string() : domain;
}

const Attribute* Node::find_attr(const std::string& key) const {
  auto it = attributes.find(key);
  return it == attributes.end() ? nullptr : &it->second;
}

std::string Node::describe() const {
  return "[" + op_type + "] node '" + name + "'";
}

#define DPRUN_ATTR_GETTERS(Type, Name, KindEnum, Field)                    \
  Type Node::attr_##Name(const std::string& key) const {                   \
    const Attribute* a = find_attr(key);                                   \
    if (a == nullptr) fail("missing required attribute '", key, "'");      \
    if (a->kind != Attribute::Kind::KindEnum)                              \
      fail("attribute '", key, "' is ", kind_name(a->kind), ", expected ", \
           kind_name(Attribute::Kind::KindEnum));                          \
    return a->Field;                                                       \
  }                                                                        \
  Type Node::attr_##Name(const std::string& key, Type fallback) const {    \
    return has_attr(key) ? attr_##Name(key) : fallback;                    \
  }
DPRUN_ATTR_GETTERS(int64_t, int, Int, i)
DPRUN_ATTR_GETTERS(float, float, Float, f)
DPRUN_ATTR_GETTERS(std::string, string, String, s)
DPRUN_ATTR_GETTERS(std::vector<int64_t>, ints, Ints, ints)
DPRUN_ATTR_GETTERS(std::vector<float>, floats, Floats, floats)
#undef DPRUN_ATTR_GETTERS

std::vector<std::string> Node::attr_strings(const std::string& key) const {
  const Attribute* a = find_attr(key);
  if (a == nullptr) return {};
  if (a->kind != Attribute::Kind::Strings) fail("attribute '", key, "' is not a string list");
  return a->strings;
}

Tensor Node::attr_tensor(const std::string& key) const {
  const Attribute* a = find_attr(key);
  if (a == nullptr) fail("missing required attribute '", key, "'");
  if (a->kind != Attribute::Kind::Tensor) fail("attribute '", key, "' is not a tensor");
  return a->t;
}

std::vector<std::string> free_variables(const Graph& graph) {
  std::set<std::string> defined, seen;
  for (const auto& in : graph.inputs) defined.insert(in.name);
  for (const auto& [name, t] : graph.initializers) defined.insert(name);
  for (const Node& node : graph.nodes)
    for (const auto& out : node.outputs) defined.insert(out);
  std::vector<std::string> free;
  auto use = [&](const std::string& name) {
    if (!name.empty() && !defined.count(name) && seen.insert(name).second) free.push_back(name);
  };
  for (const Node& node : graph.nodes) {
    for (const auto& in : node.inputs) use(in);
    for (const auto& name : implicit_inputs(node)) use(name);
  }
  for (const auto& out : graph.outputs) use(out.name);  // a subgraph may return an outer value
  return free;
}

bool holds_subgraph(const Node& node) {
  for (const auto& [key, attr] : node.attributes)
    if (attr.kind == Attribute::Kind::Graph || attr.kind == Attribute::Kind::Graphs) return true;
  return false;
}

std::vector<std::string> implicit_inputs(const Node& node) {
  std::vector<std::string> names;
  std::set<std::string> seen;
  auto add_graph = [&](const std::shared_ptr<Graph>& g) {
    if (!g) return;
    for (auto& name : free_variables(*g))
      if (seen.insert(name).second) names.push_back(std::move(name));
  };
  for (const auto& [key, attr] : node.attributes) {
    if (attr.kind == Attribute::Kind::Graph) add_graph(attr.g);
    if (attr.kind == Attribute::Kind::Graphs)
      for (const auto& g : attr.graphs) add_graph(g);
  }
  return names;
}

std::vector<const ValueInfo*> Graph::required_inputs() const {
  std::vector<const ValueInfo*> out;
  for (const auto& in : inputs)
    if (!initializers.count(in.name)) out.push_back(&in);
  return out;
}

int64_t Graph::opset(const std::string& domain) const {
  auto it = opset_imports.find(canonical_domain(domain));
  if (it == opset_imports.end())
    fail("the model does not import an opset for domain '",
         domain.empty() ? std::string("ai.onnx") : domain, "'");
  return it->second;
}

std::optional<TensorType> Graph::type_of(const std::string& value) const {
  for (const auto& v : inputs)
    if (v.name == value) return v.type;
  for (const auto& v : outputs)
    if (v.name == value && v.type.dtype != DType::Undefined) return v.type;
  if (auto it = initializers.find(value); it != initializers.end()) {
    SymbolicShape shape;
    for (int64_t d : it->second.shape()) shape.push_back(Dim::known(d));
    return TensorType{it->second.dtype(), shape};
  }
  if (auto it = value_types.find(value); it != value_types.end()) return it->second;
  return std::nullopt;
}

void Graph::sort_topologically() {
  // Kahn's algorithm; ties keep the original order so the sort is stable.
  std::unordered_map<std::string, size_t> producer;
  for (size_t n = 0; n < nodes.size(); ++n)
    for (const auto& out : nodes[n].outputs)
      if (!out.empty()) {
        if (producer.count(out))
          nodes[n].fail("output '", out, "' is also produced by node '", nodes[producer[out]].name,
                        "'");
        producer[out] = n;
      }
  std::unordered_set<std::string> available;
  for (const auto& in : inputs) available.insert(in.name);
  for (const auto& [name, t] : initializers) available.insert(name);

  std::vector<size_t> pending(nodes.size(), 0);
  std::vector<std::vector<size_t>> consumers(nodes.size());
  for (size_t n = 0; n < nodes.size(); ++n) {
    std::set<size_t> deps;
    std::vector<std::string> reads = nodes[n].inputs;
    for (auto& name : implicit_inputs(nodes[n])) reads.push_back(std::move(name));  // subgraphs
    for (const auto& in : reads) {
      if (in.empty() || available.count(in)) continue;
      auto it = producer.find(in);
      // Names from an enclosing scope are resolved by the parent graph; the loader checks them.
      if (it == producer.end()) continue;
      deps.insert(it->second);
    }
    pending[n] = deps.size();
    for (size_t d : deps) consumers[d].push_back(n);
  }
  std::set<size_t> ready;
  for (size_t n = 0; n < nodes.size(); ++n)
    if (pending[n] == 0) ready.insert(n);
  std::vector<size_t> order;
  while (!ready.empty()) {
    size_t n = *ready.begin();
    ready.erase(ready.begin());
    order.push_back(n);
    for (size_t c : consumers[n])
      if (--pending[c] == 0) ready.insert(c);
  }
  if (order.size() != nodes.size()) {
    for (size_t n = 0; n < nodes.size(); ++n)
      if (pending[n] != 0) nodes[n].fail("is part of a cycle in graph '", name, "'");
  }
  std::vector<Node> sorted;
  sorted.reserve(nodes.size());
  for (size_t n : order) sorted.push_back(std::move(nodes[n]));
  nodes = std::move(sorted);
}

}  // namespace dprun
