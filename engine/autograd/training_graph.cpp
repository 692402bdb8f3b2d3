#include "engine/autograd/training_graph.h"

#include <algorithm>
#include <set>
#include <sstream>

#include "engine/autograd/gradient_builder.h"
#include "engine/autograd/gradient_registry.h"
#include "engine/error.h"
#include "engine/rewrites/half_precision.h"
#include "engine/autograd/sync_batch_norm.h"

namespace dprun {

namespace {

bool maybe_floating(const Graph& graph, const std::string& value) {
  auto t = graph.type_of(value);
  return !t || t->dtype == DType::Undefined || is_floating(t->dtype);
}

/// Floating-point initializers that may be trained: not frozen and not a BatchNormalization
/// running statistic (in training mode a state-update target; in inference mode an input the
/// node normalizes with, which PyTorch keeps as a buffer, never trained). An initializer the
/// graph also lists as an input (older exporters list every one) trains like any other.
std::vector<std::string> candidate_parameters(const Graph& graph, const TrainingGraphSpec& spec) {
  std::set<std::string> frozen(spec.freeze.begin(), spec.freeze.end());
  for (const auto& name : frozen)
    DPRUN_CHECK(graph.initializers.count(name), "--freeze names '", name,
                "', which is not an initializer of the model");
  std::set<std::string> statistics;
  for (const auto& [value, param] : graph.state_updates) statistics.insert(param);
  for (const Node& node : graph.nodes)
    if (node.op_type == "BatchNormalization" && canonical_domain(node.domain).empty())
      for (size_t i = 3; i < std::min<size_t>(node.inputs.size(), 5); ++i)
        statistics.insert(node.inputs[i]);
  std::vector<std::string> out;
  for (const auto& [name, tensor] : graph.initializers)
    if (is_floating(tensor.dtype()) && !frozen.count(name) && !statistics.count(name))
      out.push_back(name);
  return out;
}

/// Every node on a floating-point path from a parameter to the loss whose op has no gradient
/// rule, so that all of them are reported at once (the builder stops at the first).
std::vector<std::string> nodes_without_rules(const Graph& graph,
                                             const std::vector<std::string>& params,
                                             const std::string& loss) {
  std::set<std::string> from_params(params.begin(), params.end());
  for (const Node& node : graph.nodes) {  // topological order
    bool reached = std::any_of(node.inputs.begin(), node.inputs.end(), [&](const auto& in) {
      return from_params.count(in) && maybe_floating(graph, in);
    });
    if (reached)
      for (const auto& out : node.outputs)
        if (!out.empty()) from_params.insert(out);
  }
  std::set<std::string> to_loss = {loss};
  std::vector<std::string> missing;
  for (auto it = graph.nodes.rbegin(); it != graph.nodes.rend(); ++it) {
    const Node& node = *it;
    bool feeds_loss = std::any_of(node.outputs.begin(), node.outputs.end(), [&](const auto& out) {
      return to_loss.count(out) && maybe_floating(graph, out);
    });
    if (!feeds_loss) continue;
    bool on_path = false;
    for (const auto& in : node.inputs)
      if (!in.empty() && maybe_floating(graph, in)) {
        to_loss.insert(in);
        on_path = on_path || from_params.count(in);
      }
    if (on_path &&
        !GradientRegistry::instance().find(node.domain, node.op_type, graph.opset(node.domain)))
      missing.push_back(node.describe());
  }
  std::reverse(missing.begin(), missing.end());
  return missing;
}

bool dropout_is_training(const Graph& graph, const Node& node) {
  if (graph.opset(node.domain) < 12) return !node.attr_int("is_test", 0);
  if (node.inputs.size() < 3 || node.inputs[2].empty()) return false;
  auto it = graph.initializers.find(node.inputs[2]);
  if (it != graph.initializers.end()) return it->second.item_as_double() != 0;
  for (const Node& producer : graph.nodes)
    if (producer.op_type == "Constant" && !producer.outputs.empty() &&
        producer.outputs[0] == node.inputs[2] && producer.has_attr("value"))
      return producer.attr_tensor("value").item_as_double() != 0;
  return true;  // fed at run time: keep the mask in case it is on
}

/// Gives every Dropout that may run in training mode a mask output.
void name_dropout_masks(Graph& graph) {
  for (Node& node : graph.nodes)
    if (node.op_type == "Dropout" && canonical_domain(node.domain).empty() &&
        dropout_is_training(graph, node) && (node.outputs.size() < 2 || node.outputs[1].empty())) {
      node.outputs.resize(2);
      node.outputs[1] = node.outputs[0] + "/mask";
    }
}

bool name_is_used(const Graph& graph, const std::string& name) {
  if (graph.initializers.count(name) || graph.value_types.count(name)) return true;
  for (const auto& in : graph.inputs)
    if (in.name == name) return true;
  for (const auto& node : graph.nodes)
    for (const auto& out : node.outputs)
      if (out == name) return true;
  return false;
}

/// `base`, or `base_1`, `base_2`, ... : the first name no value of `graph` has.
std::string unused_name(const Graph& graph, const std::string& base) {
  std::string name = base;
  for (int i = 1; name_is_used(graph, name); ++i) name = base + "_" + std::to_string(i);
  return name;
}

Node make_node(const std::string& op, std::vector<std::string> inputs, std::string output) {
  Node n;
  n.name = "train/" + output;
  n.op_type = op;
  n.inputs = std::move(inputs);
  n.outputs = {std::move(output)};
  return n;
}

/// A 0-d Constant node of `dtype` holding `v` (made in float32 and cast when `dtype` differs).
std::string constant_scalar(Graph& graph, const std::string& name, double v, DType dtype) {
  std::string value = unused_name(graph, name);
  Node c = make_node("Constant", {}, value);
  Attribute a;
  a.kind = Attribute::Kind::Tensor;
  a.t = dtype == DType::Float64 ? Tensor::scalar<double>(v)
                                : Tensor::scalar<float>(static_cast<float>(v));
  c.attributes["value"] = a;
  graph.nodes.push_back(std::move(c));
  if (dtype == DType::Float64 || dtype == DType::Float32) return value;
  std::string cast = unused_name(graph, name + "/cast");
  Node n = make_node("Cast", {value}, cast);
  Attribute to;
  to.kind = Attribute::Kind::Int;
  to.i = static_cast<int64_t>(dtype);
  n.attributes["to"] = to;
  graph.nodes.push_back(std::move(n));
  return cast;
}

/// Makes the running variance that BatchNormalization in training mode writes back PyTorch's.
///
/// PyTorch updates running_var with the unbiased batch variance, var * n / (n - 1), n being
/// the elements behind each channel (N * D1 * ... of the rows this replica ran). The ONNX
/// spec, which the kernel follows (the conformance tests depend on it), uses the population
/// variance: running_var_out = momentum * running_var + (1 - momentum) * var. So the training
/// graph writes back instead
///
///   running_var_out + (running_var_out - momentum * running_var) / (n - 1)
///     = momentum * running_var + (1 - momentum) * var * n / (n - 1),
///
/// computed on [C] vectors from the node's own output, whatever X's shape and layout. n comes
/// from Size(X) / Size(running_var) at run time, so each replica uses its own chunk's count.
/// With n = 1 PyTorch refuses to train; here n - 1 is taken as at least 1 so the result
/// stays finite.
void write_back_unbiased_running_variance(Graph& graph) {
  std::map<std::string, std::string> updates;
  const size_t forward_nodes = graph.nodes.size();
  for (size_t i = 0; i < forward_nodes; ++i) {
    const Node node = graph.nodes[i];
    if (node.op_type != "BatchNormalization" || !canonical_domain(node.domain).empty() ||
        node.outputs.size() < 3 || node.inputs.size() < 5)
      continue;
    auto update = graph.state_updates.find(node.outputs[2]);
    if (update == graph.state_updates.end() || update->second != node.inputs[4]) continue;
    const std::string& var_out = node.outputs[2];
    const std::string& var_in = node.inputs[4];
    DType dtype = graph.initializers.at(var_in).dtype();
    auto add = [&](const std::string& op, std::vector<std::string> inputs) {
      std::string out = unused_name(graph, var_out + "/unbiased/" + op);
      graph.nodes.push_back(make_node(op, std::move(inputs), out));
      return out;
    };
    const std::string size_x = add("Size", {node.inputs[0]}), size_var = add("Size", {var_in});
    const std::string n = add("Div", {size_x, size_var});
    Node cast = make_node("Cast", {n}, unused_name(graph, var_out + "/unbiased/Cast"));
    Attribute to;
    to.kind = Attribute::Kind::Int;
    to.i = static_cast<int64_t>(dtype);
    cast.attributes["to"] = to;
    std::string n_float = cast.outputs[0];
    graph.nodes.push_back(std::move(cast));
    std::string one = constant_scalar(graph, var_out + "/unbiased/one", 1.0, dtype);
    const std::string shifted = add("Sub", {n_float, one});
    const std::string denominator = add("Max", {shifted, one});
    // The sample count and the denominator are scalars computed from sizes: typed, a GPU plan
    // computes them on the host as shape arithmetic instead of copying sizes back to it.
    for (const std::string& v : {size_x, size_var, n})
      graph.value_types[v] = TensorType{DType::Int64, SymbolicShape{}};
    for (const std::string& v : {n_float, shifted, denominator})
      graph.value_types[v] = TensorType{dtype, SymbolicShape{}};
    double momentum = node.attr_float("momentum", 0.9f);
    std::string m = constant_scalar(graph, var_out + "/unbiased/momentum", momentum, dtype);
    std::string excess = add("Sub", {var_out, add("Mul", {var_in, m})});
    std::string unbiased = add("Add", {var_out, add("Div", {excess, denominator})});
    updates[var_out] = unbiased;
  }
  for (const auto& [old_value, new_value] : updates) {
    std::string param = graph.state_updates.at(old_value);
    graph.state_updates.erase(old_value);
    graph.state_updates[new_value] = param;
  }
}

}  // namespace

std::string gradient_output_name(const std::string& name) {
  return name + "_grad";
}

namespace {

/// The forward graph a training graph is built from: `forward` itself in float32, its mixed-
/// precision form in bfloat16 or float16 (TrainingGraphSpec::precision).
std::shared_ptr<Graph> forward_in(const Graph& forward, DType precision) {
  if (precision == DType::Float32) return std::make_shared<Graph>(forward);
  DPRUN_CHECK(precision == DType::BFloat16 || precision == DType::Float16, "training precision ",
              dtype_name(precision), " is not float32, bfloat16 or float16");
  return to_half_precision(forward, {.dtype = precision,
                                     .keep_io_types = true,
                                     .keep_parameters = true,
                                     .float32_ops_too = {"BatchNormalization"}});
}

}  // namespace

TrainingGraph build_training_graph(const Graph& forward, const TrainingGraphSpec& spec) {
  TrainingGraph result;
  std::shared_ptr<Graph> graph = forward_in(forward, spec.precision);
  name_dropout_masks(*graph);
  if (spec.sync_batch_norm) synchronize_batch_norms(*graph);
  write_back_unbiased_running_variance(*graph);
  LossNodes loss = append_loss(*graph, spec.loss);
  result.target = loss.target;
  result.loss_dtype = loss.dtype;
  result.loss_kind = spec.loss.kind;
  result.ignored_target = loss.ignored_target;

  std::vector<std::string> candidates = candidate_parameters(*graph, spec);
  std::vector<std::string> missing = nodes_without_rules(*graph, candidates, loss.loss);
  if (!missing.empty()) {
    std::ostringstream list;
    for (size_t i = 0; i < missing.size(); ++i) list << (i ? ", " : "") << missing[i];
    fail("cannot train: ", missing.size(), " node", missing.size() == 1 ? " has" : "s have",
         " no gradient rule: ", list.str());
  }

  // loss = mean loss * loss_weight; its gradient is what the replicas sum. The names avoid
  // the model's own values (a model may already call its output "loss").
  result.loss = unused_name(*graph, "loss");
  result.loss_weight = unused_name(*graph, "loss_weight");
  graph->inputs.push_back({result.loss_weight, TensorType{loss.dtype, SymbolicShape{}}});
  graph->nodes.push_back(make_node("Mul", {loss.loss, result.loss_weight}, result.loss));
  graph->value_types[result.loss] = TensorType{loss.dtype, SymbolicShape{}};

  GradientSpec gspec;
  gspec.xs = candidates;
  gspec.y = result.loss;
  gspec.zeros_for_unreachable = false;
  GradientResult grads = build_gradient(*graph, gspec);
  graph->nodes.insert(graph->nodes.end(), grads.nodes.begin(), grads.nodes.end());
  graph->value_types.insert(grads.value_types.begin(), grads.value_types.end());

  graph->outputs = {{result.loss, TensorType{loss.dtype, SymbolicShape{}}}};
  for (size_t i = 0; i < candidates.size(); ++i) {
    if (grads.gradients[i].empty()) continue;  // the loss does not depend on it
    const std::string& name = candidates[i];
    std::string out = gradient_output_name(name);
    DPRUN_CHECK(!graph->type_of(out), "the model already has a value named '", out, "'");
    graph->nodes.push_back(make_node("Identity", {grads.gradients[i]}, out));
    const Tensor& param = graph->initializers.at(name);
    SymbolicShape shape;
    for (int64_t d : param.shape()) shape.push_back(Dim::known(d));
    graph->outputs.push_back({out, TensorType{param.dtype(), shape}});
    result.parameters.push_back(name);
  }
  DPRUN_CHECK(!result.parameters.empty(),
              "nothing to train: the loss depends on no floating-point initializer that is not "
              "frozen");
  graph->name = forward.name.empty() ? "training" : forward.name + "_training";
  result.graph = graph;
  return result;
}

Graph exportable_training_graph(const TrainingGraph& training) {
  Graph g = *training.graph;
  Tensor one = training.loss_dtype == DType::Float64 ? Tensor::scalar<double>(1.0)
                                                     : Tensor::scalar<float>(1.0f);
  g.initializers[training.loss_weight] = one;
  // Running statistics are written back by dprun's executor, not by the graph: a standalone
  // training graph leaves them to its caller.
  g.state_updates.clear();
  return g;
}

}  // namespace dprun
