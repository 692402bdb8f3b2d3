#include "engine/rewrites/half_precision.h"

#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "engine/error.h"
#include "engine/float32_conversion.h"
#include "engine/op_facts.h"
#include "engine/rewrites/widen_nodes.h"

namespace dprun {

const std::set<std::string>& float32_ops() {
  // Read once, after static initialisation has registered every op's facts.
  static const std::set<std::string> ops = [] {
    std::set<std::string> names;
    for (const OpFacts* facts : OpFactsRegistry::instance().definitions())
      if (facts->domain.empty() && facts->float32_only) names.insert(facts->op_type);
    return names;
  }();
  return ops;
}

namespace {

/// Whether `node` stays in float32: an ai.onnx op registered float32_only (OpFacts, with the
/// reasons at the registrations: float-only inputs in the schemas, positions, counts and random
/// draws that 16 bits would corrupt) or one of `too`.
bool is_float32_op(const Node& node, const std::set<std::string>& too) {
  return canonical_domain(node.domain).empty() &&
         (op_facts(node).float32_only || too.count(node.op_type));
}

/// `t`, a float32 tensor, rounded to `dtype` on the host.
Tensor converted(const Tensor& t, DType dtype) {
  Tensor out = Tensor::empty(t.shape(), dtype);
  round_into(t.to(Device::cpu()), out);
  return out;
}

/// Which float32 values the conversion leaves in float32: those every reader of which is a
/// float32 op, made by a float32 op or known when the graph is compiled (initializers and
/// Constants), and not a graph output; and the unread outputs of float32 ops (the running
/// statistics a BatchNormalization kept in float32 writes back).
std::set<std::string> values_kept_in_float32(const Graph& graph, const std::set<std::string>& too) {
  std::map<std::string, bool> only_float32_readers;
  for (const Node& node : graph.nodes)
    for (const auto& name : node.inputs)
      if (!name.empty()) {
        auto [it, first] = only_float32_readers.emplace(name, true);
        it->second = it->second && is_float32_op(node, too);
      }
  for (const auto& out : graph.outputs) only_float32_readers[out.name] = false;
  std::set<std::string> kept;
  auto keep_if_read_by_float32_ops_only = [&](const std::string& name, bool unread_too) {
    auto it = only_float32_readers.find(name);
    std::optional<TensorType> type = graph.type_of(name);
    const bool read_by_float32_only = it == only_float32_readers.end() ? unread_too : it->second;
    if (read_by_float32_only && type && type->dtype == DType::Float32) kept.insert(name);
  };
  for (const auto& [name, tensor] : graph.initializers)
    keep_if_read_by_float32_ops_only(name, false);
  for (const auto& in : graph.inputs) keep_if_read_by_float32_ops_only(in.name, false);
  for (const Node& node : graph.nodes) {
    const bool float32_op = is_float32_op(node, too);
    if (float32_op || node.op_type == "Constant")
      for (const auto& name : node.outputs)
        if (!name.empty()) keep_if_read_by_float32_ops_only(name, float32_op);
  }
  return kept;
}

/// Converts the graph's float32 values and float32-making attributes to 16 bits in place.
class Converter {
 public:
  Converter(Graph& graph, const HalfPrecisionOptions& options)
      : graph_(graph),
        dtype_(options.dtype),
        float32_ops_too_(options.float32_ops_too),
        kept_(values_kept_in_float32(graph, options.float32_ops_too)) {}

  bool is_float32_op(const Node& node) const {
    return dprun::is_float32_op(node, float32_ops_too_);
  }

  bool converts(const std::string& value) const {
    std::optional<TensorType> type = graph_.type_of(value);
    return type && type->dtype == DType::Float32 && !kept_.count(value);
  }

  void convert_initializers(const std::set<std::string>& skip) {
    for (auto& [name, tensor] : graph_.initializers)
      if (tensor.dtype() == DType::Float32 && !kept_.count(name) && !skip.count(name))
        tensor = converted(tensor, dtype_);
  }

  void convert_value_types() {
    for (auto& [name, type] : graph_.value_types)
      if (type.dtype == DType::Float32 && !kept_.count(name)) type.dtype = dtype_;
  }

  /// Constant values, Cast and EyeLike targets and ConstantOfShape fills of float32 values.
  void convert_attributes(Node& node) const {
    if (is_float32_op(node) || node.outputs.empty() || kept_.count(node.outputs[0])) return;
    const int64_t float32 = static_cast<int64_t>(DType::Float32);
    if (node.op_type == "Cast" || node.op_type == "EyeLike") {
      const char* key = node.op_type == "Cast" ? "to" : "dtype";
      if (const Attribute* a = node.find_attr(key);
          a && a->kind == Attribute::Kind::Int && a->i == float32)
        node.attributes[key] = Attribute::of_int(static_cast<int64_t>(dtype_));
    } else if (node.op_type == "Constant" || node.op_type == "ConstantOfShape") {
      convert_value_attribute(node);
    }
  }

  DType dtype() const { return dtype_; }

 private:
  void convert_value_attribute(Node& node) const {
    if (Attribute* a = find(node, "value"); a && a->kind == Attribute::Kind::Tensor) {
      if (a->t.dtype() == DType::Float32) a->t = converted(a->t, dtype_);
    } else if (Attribute* f = find(node, "value_float")) {
      Tensor value = converted(Tensor::scalar(f->f), dtype_);
      node.attributes.erase("value_float");
      node.attributes["value"] = Attribute::of_tensor(value);
    } else if (Attribute* fs = find(node, "value_floats")) {
      Tensor value = converted(
          Tensor::from_vector({static_cast<int64_t>(fs->floats.size())}, fs->floats), dtype_);
      node.attributes.erase("value_floats");
      node.attributes["value"] = Attribute::of_tensor(value);
    }
  }

  static Attribute* find(Node& node, const std::string& key) {
    auto it = node.attributes.find(key);
    return it == node.attributes.end() ? nullptr : &it->second;
  }

  Graph& graph_;
  const DType dtype_;
  const std::set<std::string> float32_ops_too_;
  const std::set<std::string> kept_;
};

/// Renames every read of `from` to `to`.
void rename_reads(Graph& graph, const std::string& from, const std::string& to) {
  for (Node& node : graph.nodes)
    for (auto& name : node.inputs)
      if (name == from) name = to;
}

/// Names for the 16-bit copies of values: `value` + "/" + the dtype's name, or that with "_1",
/// "_2", ... where the graph (a model converted already, say) or an earlier copy has it.
class ConvertedNames {
 public:
  explicit ConvertedNames(const Graph& graph) {
    for (const auto& in : graph.inputs) used_.insert(in.name);
    for (const auto& out : graph.outputs) used_.insert(out.name);
    for (const auto& [name, tensor] : graph.initializers) used_.insert(name);
    for (const auto& [name, type] : graph.value_types) used_.insert(name);
    for (const Node& node : graph.nodes) used_.insert(node.outputs.begin(), node.outputs.end());
  }

  std::string of(const std::string& value, DType dtype) {
    const std::string base = value + "/" + std::string(dtype_name(dtype));
    std::string name = base;
    for (int k = 1; used_.count(name); ++k) name = base + "_" + std::to_string(k);
    used_.insert(name);
    return name;
  }

 private:
  std::set<std::string> used_;
};

TensorType retyped(TensorType type, DType dtype) {
  type.dtype = dtype;
  return type;
}

/// Float32 graph inputs stay float32: each is cast to 16 bits for its readers.
std::vector<Node> cast_inputs(Graph& graph, const Converter& c, ConvertedNames& names) {
  std::vector<Node> casts;
  for (const auto& in : graph.inputs) {
    if (!c.converts(in.name)) continue;
    const std::string name = names.of(in.name, c.dtype());
    rename_reads(graph, in.name, name);
    graph.value_types[name] = retyped(in.type, c.dtype());
    casts.push_back(cast_node(in.name, name, c.dtype(), cast_opset(graph)));
  }
  return casts;
}

/// Float32 initializers stay float32 (keep_parameters): each is cast to 16 bits once for the
/// nodes that compute in 16 bits; float32 ops go on reading it as it is.
std::vector<Node> cast_parameters(Graph& graph, const Converter& c, ConvertedNames& names,
                                  std::set<std::string>& kept) {
  std::vector<Node> casts;
  for (const auto& [name, tensor] : graph.initializers) {
    if (!c.converts(name)) continue;
    kept.insert(name);
    const std::string cast = names.of(name, c.dtype());
    bool read = false;
    for (Node& node : graph.nodes)
      if (!c.is_float32_op(node))
        for (auto& in : node.inputs)
          if (in == name) {
            in = cast;
            read = true;
          }
    if (!read) continue;
    SymbolicShape shape;
    for (int64_t d : tensor.shape()) shape.push_back(Dim::known(d));
    graph.value_types[cast] = TensorType{c.dtype(), shape};
    casts.push_back(cast_node(name, cast, c.dtype(), cast_opset(graph)));
  }
  return casts;
}

/// Float32 graph outputs stay float32: each is computed in 16 bits under another name and cast.
std::vector<Node> cast_outputs(Graph& graph, const Converter& c, ConvertedNames& names) {
  std::vector<Node> casts;
  for (const auto& out : graph.outputs) {
    const bool passed_through =
        std::any_of(graph.inputs.begin(), graph.inputs.end(),
                    [&](const ValueInfo& in) { return in.name == out.name; });
    if (!c.converts(out.name) || graph.initializers.count(out.name) || passed_through) continue;
    const std::string name = names.of(out.name, c.dtype());
    rename_reads(graph, out.name, name);
    for (Node& node : graph.nodes)
      for (auto& o : node.outputs)
        if (o == out.name) o = name;
    for (auto& [value, initializer] : graph.state_updates)
      if (value == out.name) {
        graph.state_updates[name] = initializer;
        graph.state_updates.erase(value);
        break;
      }
    graph.value_types.erase(out.name);
    graph.value_types[name] = retyped(out.type, c.dtype());
    casts.push_back(cast_node(name, out.name, DType::Float32, cast_opset(graph)));
  }
  return casts;
}

}  // namespace

std::shared_ptr<Graph> to_half_precision(const Graph& graph, const HalfPrecisionOptions& options) {
  DPRUN_CHECK(is_16bit_float(options.dtype), "16-bit conversion: ", dtype_name(options.dtype),
              " is not float16 or bfloat16");
  for (const Node& node : graph.nodes) {
    if (holds_subgraph(node)) node.fail("16-bit conversion does not cover nodes holding subgraphs");
    if (node.op_type == "Gradient")  // differentiates the float32 graph it is part of
      node.fail("16-bit conversion does not cover gradients of the graph");
  }
  auto out = std::make_shared<Graph>(graph);
  Converter converter(*out, options);
  ConvertedNames names(*out);
  std::vector<Node> before, after;
  std::set<std::string> input_names;
  if (options.keep_io_types) {
    before = cast_inputs(*out, converter, names);
    after = cast_outputs(*out, converter, names);
    for (const auto& in : graph.inputs) input_names.insert(in.name);
  } else {
    for (auto& in : out->inputs)
      if (converter.converts(in.name)) in.type.dtype = options.dtype;
    for (auto& o : out->outputs)
      if (converter.converts(o.name)) o.type.dtype = options.dtype;
  }
  if (options.keep_parameters) {
    std::vector<Node> casts = cast_parameters(*out, converter, names, input_names);
    before.insert(before.end(), casts.begin(), casts.end());
  }
  converter.convert_initializers(input_names);
  converter.convert_value_types();
  for (Node& node : out->nodes) converter.convert_attributes(node);
  out->nodes.insert(out->nodes.begin(), before.begin(), before.end());
  out->nodes.insert(out->nodes.end(), after.begin(), after.end());
  std::vector<bool> float32(out->nodes.size());
  for (size_t n = 0; n < out->nodes.size(); ++n)
    float32[n] = converter.is_float32_op(out->nodes[n]);
  return widen_nodes(*out, float32);
}

}  // namespace dprun
