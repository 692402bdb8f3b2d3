#include "loader/graph_proto.h"

#include "loader/tensor_proto.h"

namespace dprun {

namespace {

Attribute attribute_from_proto(const onnx::AttributeProto& a, const Node& node,
                               const std::map<std::string, int64_t>& opsets,
                               const ExternalDataFolders& folders) {
  Attribute out;
  using P = onnx::AttributeProto;
  switch (a.type()) {
    case P::FLOAT:
      out.kind = Attribute::Kind::Float;
      out.f = a.f();
      break;
    case P::INT:
      out.kind = Attribute::Kind::Int;
      out.i = a.i();
      break;
    case P::STRING:
      out.kind = Attribute::Kind::String;
      out.s = a.s();
      break;
    case P::TENSOR:
      out.kind = Attribute::Kind::Tensor;
      out.t = tensor_from_proto(a.t(), folders);
      break;
    case P::GRAPH:
      out.kind = Attribute::Kind::Graph;
      out.g = graph_from_proto(a.g(), opsets, folders);
      break;
    case P::FLOATS:
      out.kind = Attribute::Kind::Floats;
      out.floats.assign(a.floats().begin(), a.floats().end());
      break;
    case P::INTS:
      out.kind = Attribute::Kind::Ints;
      out.ints.assign(a.ints().begin(), a.ints().end());
      break;
    case P::STRINGS:
      out.kind = Attribute::Kind::Strings;
      out.strings.assign(a.strings().begin(), a.strings().end());
      break;
    case P::TENSORS:
      out.kind = Attribute::Kind::Tensors;
      for (const auto& t : a.tensors()) out.tensors.push_back(tensor_from_proto(t, folders));
      break;
    case P::GRAPHS:
      out.kind = Attribute::Kind::Graphs;
      for (const auto& g : a.graphs()) out.graphs.push_back(graph_from_proto(g, opsets, folders));
      break;
    default:
      node.fail("attribute '", a.name(), "' has an unsupported kind (", static_cast<int>(a.type()),
                ")");
  }
  return out;
}

void attribute_to_proto(const std::string& name, const Attribute& a, onnx::AttributeProto* p) {
  using P = onnx::AttributeProto;
  p->set_name(name);
  switch (a.kind) {
    case Attribute::Kind::Float:
      p->set_type(P::FLOAT);
      p->set_f(a.f);
      break;
    case Attribute::Kind::Int:
      p->set_type(P::INT);
      p->set_i(a.i);
      break;
    case Attribute::Kind::String:
      p->set_type(P::STRING);
      p->set_s(a.s);
      break;
    case Attribute::Kind::Tensor:
      p->set_type(P::TENSOR);
      tensor_to_proto(a.t, "", p->mutable_t());
      break;
    case Attribute::Kind::Graph:
      p->set_type(P::GRAPH);
      graph_to_proto(*a.g, {}, p->mutable_g());
      break;
    case Attribute::Kind::Floats:
      p->set_type(P::FLOATS);
      for (float f : a.floats) p->add_floats(f);
      break;
    case Attribute::Kind::Ints:
      p->set_type(P::INTS);
      for (int64_t i : a.ints) p->add_ints(i);
      break;
    case Attribute::Kind::Strings:
      p->set_type(P::STRINGS);
      for (const auto& s : a.strings) p->add_strings(s);
      break;
    case Attribute::Kind::Tensors:
      p->set_type(P::TENSORS);
      for (const auto& t : a.tensors) tensor_to_proto(t, "", p->add_tensors());
      break;
    case Attribute::Kind::Graphs:
      p->set_type(P::GRAPHS);
      for (const auto& g : a.graphs) graph_to_proto(*g, {}, p->add_graphs());
      break;
  }
}

void type_to_proto(const TensorType& type, onnx::TypeProto* proto) {
  auto* tensor_type = proto->mutable_tensor_type();
  tensor_type->set_elem_type(static_cast<int32_t>(type.dtype));
  if (!type.shape) return;
  auto* shape = tensor_type->mutable_shape();
  for (const Dim& d : *type.shape) {
    auto* dim = shape->add_dim();
    if (d.is_known())
      dim->set_dim_value(d.value);
    else if (!d.symbol.empty())
      dim->set_dim_param(d.symbol);
  }
}

// BatchNormalization in training mode returns updated running statistics as outputs 1 and 2;
// PyTorch updates them in place. Record that so the executor writes them back.
void record_state_updates(Graph& graph) {
  for (const Node& node : graph.nodes) {
    if (node.op_type != "BatchNormalization" || !canonical_domain(node.domain).empty()) continue;
    if (node.attr_int("training_mode", 0) == 0 || node.inputs.size() < 5) continue;
    for (size_t k = 0; k < 2; ++k) {
      size_t out = 1 + k, in = 3 + k;
      if (out < node.outputs.size() && !node.outputs[out].empty() &&
          graph.initializers.count(node.inputs[in]))
        graph.state_updates[node.outputs[out]] = node.inputs[in];
    }
  }
}

}  // namespace

TensorType type_from_proto(const onnx::TypeProto& type) {
  TensorType out;
  if (!type.has_tensor_type()) return out;
  const auto& t = type.tensor_type();
  out.dtype = static_cast<DType>(t.elem_type());
  if (t.has_shape()) {
    SymbolicShape shape;
    for (const auto& d : t.shape().dim()) {
      if (d.has_dim_value())
        shape.push_back(Dim::known(d.dim_value()));
      else if (d.has_dim_param())
        shape.push_back(Dim::named(d.dim_param()));
      else
        shape.push_back(Dim{});
    }
    out.shape = std::move(shape);
  }
  return out;
}

std::shared_ptr<Graph> graph_from_proto(const onnx::GraphProto& proto,
                                        const std::map<std::string, int64_t>& opsets,
                                        const ExternalDataFolders& folders) {
  auto graph = std::make_shared<Graph>();
  graph->name = proto.name();
  graph->doc_string = proto.doc_string();
  graph->opset_imports = opsets;
  for (const auto& init : proto.initializer())
    graph->initializers[init.name()] = tensor_from_proto(init, folders);
  DPRUN_CHECK(proto.sparse_initializer_size() == 0, "graph '", proto.name(),
              "' has sparse initializers, which are not supported");
  for (const auto& in : proto.input())
    graph->inputs.push_back({in.name(), type_from_proto(in.type())});
  for (const auto& out : proto.output())
    graph->outputs.push_back({out.name(), type_from_proto(out.type())});
  for (const auto& vi : proto.value_info())
    graph->value_types[vi.name()] = type_from_proto(vi.type());

  int unnamed = 0;
  for (const auto& n : proto.node()) {
    Node node;
    node.op_type = n.op_type();
    node.domain = canonical_domain(n.domain());
    node.name = n.name().empty() ? n.op_type() + "_" + std::to_string(unnamed++) : n.name();
    node.inputs.assign(n.input().begin(), n.input().end());
    node.outputs.assign(n.output().begin(), n.output().end());
    for (const auto& a : n.attribute()) {
      if (!a.ref_attr_name().empty())
        node.fail("attribute '", a.name(), "' refers to a function attribute, not supported here");
      // Type attributes (Optional's `type`) only describe static types; nothing at run time
      // depends on them.
      if (a.type() == onnx::AttributeProto::TYPE_PROTO) continue;
      node.attributes[a.name()] = attribute_from_proto(a, node, opsets, folders);
    }
    graph->nodes.push_back(std::move(node));
  }
  graph->sort_topologically();
  record_state_updates(*graph);
  return graph;
}

void graph_to_proto(const Graph& graph, const std::map<std::string, Tensor>& parameters,
                    onnx::GraphProto* proto) {
  proto->set_name(graph.name);
  if (!graph.doc_string.empty()) proto->set_doc_string(graph.doc_string);
  for (const auto& [name, tensor] : graph.initializers) {
    auto it = parameters.find(name);
    tensor_to_proto(it != parameters.end() ? it->second : tensor, name, proto->add_initializer());
  }
  for (const auto& in : graph.inputs) {
    auto* vi = proto->add_input();
    vi->set_name(in.name);
    if (in.type.dtype != DType::Undefined) type_to_proto(in.type, vi->mutable_type());
  }
  for (const auto& out : graph.outputs) {
    auto* vi = proto->add_output();
    vi->set_name(out.name);
    if (out.type.dtype != DType::Undefined) type_to_proto(out.type, vi->mutable_type());
  }
  for (const Node& node : graph.nodes) {
    auto* n = proto->add_node();
    n->set_name(node.name);
    n->set_op_type(node.op_type);
    if (!node.domain.empty()) n->set_domain(node.domain);
    for (const auto& in : node.inputs) n->add_input(in);
    for (const auto& out : node.outputs) n->add_output(out);
    for (const auto& [name, attr] : node.attributes)
      attribute_to_proto(name, attr, n->add_attribute());
  }
}

}  // namespace dprun
