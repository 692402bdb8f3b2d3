#include "engine/autograd/gradient_builder.h"

#include <algorithm>

#include "engine/autograd/shape_propagation.h"
#include "engine/constant_value.h"
#include "engine/half.h"
#include "engine/model.h"
#include "engine/op_facts.h"
#include "engine/rewrites/attention_fusion.h"
#include "engine/rewrites/fusion_matcher.h"
#include "engine/rewrites/gelu_fusion.h"
#include "engine/rewrites/layer_norm_fusion.h"
#include "engine/rewrites/rewrite_domain.h"

namespace dprun {

/// Holds the state of one build_gradient call: the forward graph's index and the nodes emitted.
class GradientBuilder {
 public:
  GradientBuilder(const Graph& graph, const GradientSpec& spec) : graph_(graph), spec_(spec) {
    for (size_t n = 0; n < graph.nodes.size(); ++n) {
      const Node& node = graph.nodes[n];
      for (const auto& out : node.outputs)
        if (!out.empty()) {
          producer_[out] = n;
          used_.insert(out);
        }
      for (const auto& in : node.inputs) used_.insert(in);
    }
    for (const auto& in : graph.inputs) {
      used_.insert(in.name);
      graph_inputs_.insert(in.name);
    }
    for (const auto& out : graph.outputs) used_.insert(out.name);
    for (const auto& [name, t] : graph.initializers) used_.insert(name);
  }

  GradientResult run();

  const Graph& graph() const { return graph_; }

  std::string fresh(const std::string& hint) {
    std::string name;
    do {
      name = spec_.prefix + hint + "_" + std::to_string(counter_++);
    } while (used_.count(name));
    used_.insert(name);
    return name;
  }

  std::vector<std::string> emit(const std::string& scope, const std::string& op_type,
                                std::vector<std::string> inputs, size_t n_outputs,
                                std::map<std::string, Attribute> attrs,
                                const std::string& domain = "") {
    Node node;
    node.op_type = op_type;
    node.domain = domain;
    node.name = fresh(scope + "/" + op_type);
    node.inputs = std::move(inputs);
    node.attributes = std::move(attrs);
    for (size_t i = 0; i < n_outputs; ++i) node.outputs.push_back(fresh(scope + "/" + op_type));
    std::vector<std::string> outs = node.outputs;
    nodes_.push_back(std::move(node));
    return outs;
  }

  /// The declared type, with the shape filled in by propagate_shape from the producer's
  /// inputs when the graph carries none (a graph without shape inference, or a value that
  /// inference left unknown).
  std::optional<TensorType> type_of(const std::string& value) const {
    std::optional<TensorType> t = graph_.type_of(value);
    if (t && t->shape) return t;
    auto shape = try_shape(value, 0);
    if (!shape) return t;
    TensorType out = t.value_or(TensorType{});
    if (out.dtype == DType::Undefined) out.dtype = try_dtype(value).value_or(DType::Undefined);
    out.shape = shape;
    return out;
  }

  std::optional<SymbolicShape> try_shape(const std::string& value, int depth) const {
    if (auto t = graph_.type_of(value); t && t->shape) return t->shape;
    if (auto it = emitted_types_.find(value); it != emitted_types_.end()) return it->second.shape;
    if (auto it = shape_cache_.find(value); it != shape_cache_.end()) return it->second;
    auto p = producer_.find(value);
    if (p == producer_.end() || depth > 256) return std::nullopt;
    const Node& node = graph_.nodes[p->second];
    auto pos = std::find(node.outputs.begin(), node.outputs.end(), value);
    ShapeSource source{[&](const std::string& v) -> std::optional<SymbolicShape> {
                         if (auto c = constant_value(v)) {
                           SymbolicShape s;
                           for (int64_t d : c->shape()) s.push_back(Dim::known(d));
                           return s;
                         }
                         return try_shape(v, depth + 1);
                       },
                       [&](const std::string& v) { return constant_value(v); }};
    auto result = propagate_shape(node, static_cast<size_t>(pos - node.outputs.begin()), source);
    shape_cache_[value] = result;  // unknown too: a value may be asked for again and again
    return result;
  }

  std::optional<DType> try_dtype(const std::string& value, int depth = 0) const {
    if (auto t = graph_.type_of(value); t && t->dtype != DType::Undefined) return t->dtype;
    if (auto it = emitted_types_.find(value); it != emitted_types_.end()) return it->second.dtype;
    if (auto it = dtype_cache_.find(value); it != dtype_cache_.end()) return it->second;
    auto p = producer_.find(value);
    if (p == producer_.end() || depth > 256) return std::nullopt;
    const Node& node = graph_.nodes[p->second];
    auto pos = std::find(node.outputs.begin(), node.outputs.end(), value);
    auto result = output_dtype(node, static_cast<size_t>(pos - node.outputs.begin()), depth);
    if (result) dtype_cache_[value] = *result;
    return result;
  }

  /// The element type of output `index` of `node` by its op's type rule (OpFacts: a fixed
  /// type, an attribute, or the type of the input that carries the values, the first one by
  /// default). nullopt where it cannot be told, so the value is assumed differentiable.
  std::optional<DType> output_dtype(const Node& node, size_t index, int depth) const {
    const InputDType input_dtype = [&](size_t i) -> std::optional<DType> {
      if (i >= node.inputs.size() || node.inputs[i].empty()) return std::nullopt;
      return try_dtype(node.inputs[i], depth + 1);
    };
    return op_facts(node).output_dtype(node, index, input_dtype);
  }

  std::optional<Tensor> constant_value(const std::string& value) const {
    if (auto it = graph_.initializers.find(value);
        it != graph_.initializers.end() && !graph_inputs_.count(value))
      return it->second;
    if (auto it = emitted_constants_.find(value); it != emitted_constants_.end()) return it->second;
    auto p = producer_.find(value);
    if (p == producer_.end()) return std::nullopt;
    const Node& node = graph_.nodes[p->second];
    if (node.op_type == "Constant" && node.has_attr("value")) return node.attr_tensor("value");
    return folded_value(value, 0);
  }

  int64_t onnx_opset() const { return graph_.opset(""); }

 private:
  // The passes of run(), in order.
  std::unordered_set<std::string> checked_xs() const;
  std::vector<size_t> ancestors_of_y(const std::unordered_set<std::string>& xs) const;
  std::vector<bool> mark_differentiable(const std::vector<size_t>& order,
                                        const std::unordered_set<std::string>& xs);
  std::unordered_map<size_t, Node> composites(const std::vector<size_t>& order,
                                              const std::unordered_set<std::string>& xs) const;
  std::optional<Fusion> attention_composite(const Matcher& matcher, size_t n) const;
  void seed_dy();
  void backpropagate(const Node& node);
  std::string gradient_of_x(const std::string& x);

  // The value of `value` when it is computed from Constant nodes and static shapes alone
  // (PyTorch's exports without constant folding build a Resize's scales as
  // Concat(Constant, Constant), a reshape's target from Shape of a static value...): the
  // producer is run on the host by its own kernel. Parameters are left out, as their values
  // change while training; so are random ops and large results.
  std::optional<Tensor> folded_value(const std::string& value, int depth) const {
    if (auto it = folded_.find(value); it != folded_.end()) return it->second;
    auto p = producer_.find(value);
    if (p == producer_.end() || depth > 64) return std::nullopt;
    std::optional<Tensor> result = fold(graph_.nodes[p->second], value, depth);
    folded_[value] = result;
    return result;
  }

  std::optional<Tensor> fold(const Node& node, const std::string& value, int depth) const {
    if (op_facts(node).random || holds_subgraph(node)) return std::nullopt;
    if (node.op_type == "Shape") return static_shape_of(node, depth);
    Graph g;
    g.opset_imports = graph_.opset_imports;
    for (const std::string& in : node.inputs) {
      if (in.empty() || g.initializers.count(in)) continue;
      if (graph_inputs_.count(in)) return std::nullopt;
      if (auto init = graph_.initializers.find(in); init != graph_.initializers.end()) {
        // Integer tables (shapes, indices) fold; a floating one may be a parameter.
        if (is_floating(init->second.dtype())) return std::nullopt;
        g.initializers[in] = init->second;
        continue;
      }
      std::optional<Tensor> c =
          emitted_constants_.count(in) ? emitted_constants_.at(in) : folded_value(in, depth + 1);
      if (!c || c->numel() > kMaxFolded) return std::nullopt;
      g.initializers[in] = *c;
    }
    g.nodes = {node};
    for (const std::string& out : node.outputs)
      if (!out.empty()) g.outputs.push_back({out, {}});
    try {
      std::vector<Tensor> outs =
          Model(std::make_shared<Graph>(std::move(g)), Device::cpu()).run(std::vector<Tensor>{});
      for (size_t i = 0, k = 0; i < node.outputs.size(); ++i) {
        if (node.outputs[i].empty()) continue;
        const Tensor& t = outs[k++];
        if (t.numel() <= kMaxFolded) folded_[node.outputs[i]] = t;
      }
    } catch (const Error&) {
      return std::nullopt;  // not computable here: the rule decides without it
    }
    auto it = folded_.find(value);
    return it == folded_.end() ? std::nullopt : it->second;
  }

  // Shape(v) when every dim of v is known at build time (start and end from opset 15).
  std::optional<Tensor> static_shape_of(const Node& node, int depth) const {
    if (node.inputs.empty()) return std::nullopt;
    std::optional<SymbolicShape> shape = try_shape(node.inputs[0], depth + 1);
    if (!shape) return std::nullopt;
    std::vector<int64_t> dims;
    for (const Dim& d : *shape) {
      if (!d.is_known()) return std::nullopt;
      dims.push_back(d.value);
    }
    const auto rank = static_cast<int64_t>(dims.size());
    auto clamp = [&](int64_t a) { return std::clamp(a < 0 ? a + rank : a, int64_t{0}, rank); };
    const int64_t start = clamp(node.attr_int("start", 0)), end = clamp(node.attr_int("end", rank));
    std::vector<int64_t> kept(dims.begin() + start, dims.begin() + std::max(start, end));
    return Tensor::from_vector<int64_t>({static_cast<int64_t>(kept.size())}, kept);
  }

  static constexpr int64_t kMaxFolded = 4096;  // elements: shapes, scales, small tables

  // Types the emitted values where their ops' rules tell both dtype and shape from the
  // inputs, in emission (topological) order, once the backward pass is built: the planner
  // keeps small integer results computed from shapes on the host when it knows their types.
  // Done after building, so the rules see the same types whichever nodes they emitted.
  void type_emitted_values() {
    // The emitted constants' values (axes, shapes, ones) tell shapes as the graph's do.
    for (const Node& node : nodes_)
      if (node.op_type == "Constant" && node.has_attr("value"))
        emitted_constants_.emplace(node.outputs[0], node.attr_tensor("value"));
    shape_cache_.clear();  // what was unknown without them may be known now
    for (const Node& node : nodes_)
      for (size_t i = 0; i < node.outputs.size(); ++i) {
        const std::optional<DType> dtype = output_dtype(node, i, 0);
        if (!dtype || *dtype == DType::Undefined) continue;
        ShapeSource source{[&](const std::string& v) -> std::optional<SymbolicShape> {
                             if (auto c = constant_value(v)) {
                               SymbolicShape s;
                               for (int64_t d : c->shape()) s.push_back(Dim::known(d));
                               return s;
                             }
                             return try_shape(v, 0);
                           },
                           [&](const std::string& v) { return constant_value(v); }};
        if (auto shape = propagate_shape(node, i, source))
          emitted_types_[node.outputs[i]] = TensorType{*dtype, *shape};
      }
  }

  // The accumulated gradient of `value` (a Sum node when several contributions arrived).
  std::string accumulated(const std::string& value) {
    auto it = grads_.find(value);
    if (it == grads_.end() || it->second.empty()) return {};
    auto& parts = it->second;
    if (parts.size() > 1) {
      std::string sum = emit("accumulate", "Sum", parts, 1, {})[0];
      parts.assign(1, sum);
    }
    return parts[0];
  }

  bool wants_gradient(const std::string& value) const {
    return !value.empty() && depends_on_x_.count(value) && may_be_floating(value);
  }

  // Only floating values carry gradients; an unknown type is assumed floating.
  bool may_be_floating(const std::string& value) const {
    auto dt = try_dtype(value);
    return !dt || is_floating(*dt);
  }

  const Graph& graph_;
  const GradientSpec& spec_;
  std::unordered_map<std::string, size_t> producer_;
  std::unordered_set<std::string> used_, graph_inputs_, depends_on_x_;
  mutable std::unordered_map<std::string, DType> dtype_cache_;
  mutable std::unordered_map<std::string, std::optional<SymbolicShape>> shape_cache_;
  std::map<std::string, TensorType> emitted_types_;  // set once building is done
  std::unordered_map<std::string, std::vector<std::string>> grads_;
  std::vector<Node> nodes_;
  // Filled once the backward pass is built (type_emitted_values), so that building decides the
  // same whichever constants it emitted.
  std::unordered_map<std::string, Tensor> emitted_constants_;
  mutable std::unordered_map<std::string, std::optional<Tensor>> folded_;
  size_t counter_ = 0;
};

GradientResult GradientBuilder::run() {
  const std::unordered_set<std::string> xs = checked_xs();
  const std::vector<size_t> order = ancestors_of_y(xs);
  const std::vector<bool> active = mark_differentiable(order, xs);
  const std::unordered_map<size_t, Node> composite = composites(order, xs);
  if (depends_on_x_.count(spec_.y)) seed_dy();
  // A composite's rule runs at its last node; the nodes inside it receive no gradient.
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    if (!active[*it]) continue;
    auto c = composite.find(*it);
    backpropagate(c == composite.end() ? graph_.nodes[*it] : c->second);
  }

  GradientResult result;
  for (const auto& x : spec_.xs) result.gradients.push_back(gradient_of_x(x));
  type_emitted_values();
  result.value_types = std::move(emitted_types_);
  result.nodes = std::move(nodes_);
  return result;
}

// Checks that y and every x name values of the graph; returns the xs as a set.
std::unordered_set<std::string> GradientBuilder::checked_xs() const {
  DPRUN_CHECK(!spec_.y.empty(), "gradient: y is not named");
  DPRUN_CHECK(used_.count(spec_.y), "gradient: y '", spec_.y, "' is not a value of graph '",
              graph_.name, "'");
  std::unordered_set<std::string> xs(spec_.xs.begin(), spec_.xs.end());
  for (const auto& x : spec_.xs)
    DPRUN_CHECK(used_.count(x), "gradient: x '", x, "' is not a value of graph '", graph_.name,
                "'");
  return xs;
}

// Ancestors of y in topological order (iterative post-order DFS); xs are leaves.
std::vector<size_t> GradientBuilder::ancestors_of_y(
    const std::unordered_set<std::string>& xs) const {
  std::vector<size_t> order;
  std::vector<char> state(graph_.nodes.size(), 0);  // 0 new, 1 open, 2 done
  std::vector<std::pair<size_t, size_t>> stack;     // node, next input to visit
  auto push_value = [&](const std::string& v) {
    if (v.empty() || xs.count(v)) return;
    auto p = producer_.find(v);
    if (p == producer_.end()) return;
    if (state[p->second] == 1)
      graph_.nodes[p->second].fail("is part of a cycle in graph '", graph_.name, "'");
    if (state[p->second] == 0) {
      state[p->second] = 1;
      stack.emplace_back(p->second, 0);
    }
  };
  push_value(spec_.y);
  while (!stack.empty()) {
    auto& [n, next] = stack.back();
    const Node& node = graph_.nodes[n];
    if (next < node.inputs.size()) {
      push_value(node.inputs[next++]);
      continue;
    }
    state[n] = 2;
    order.push_back(n);
    stack.pop_back();
  }
  return order;
}

// Values on a differentiable path from some x (into depends_on_x_), and per node whether it
// reads one. Integer and bool values cut the path (Shape, Equal, ArgMax, Cast to int...):
// nothing flows back through them, so the nodes that read or produce only such values need no
// rule.
std::vector<bool> GradientBuilder::mark_differentiable(const std::vector<size_t>& order,
                                                       const std::unordered_set<std::string>& xs) {
  depends_on_x_ = xs;
  std::vector<bool> active(graph_.nodes.size(), false);
  for (size_t n : order) {
    const Node& node = graph_.nodes[n];
    bool any = std::any_of(node.inputs.begin(), node.inputs.end(),
                           [&](const std::string& in) { return depends_on_x_.count(in) != 0; });
    if (!any) continue;
    active[n] = true;
    for (const auto& out : node.outputs)
      if (!out.empty() && !xs.count(out) && may_be_floating(out)) depends_on_x_.insert(out);
  }
  return active;
}

// The chains among the ancestors of y that compute one op (GradientSpec::differentiate_composites:
// layer normalization, GELU's erf and tanh forms, scaled dot-product attention),
// as that op's node, by the index of the chain's last node. A chain holding y or an x inside
// it is left to its nodes' own rules: their gradients are asked for.
std::unordered_map<size_t, Node> GradientBuilder::composites(
    const std::vector<size_t>& order, const std::unordered_set<std::string>& xs) const {
  std::unordered_map<size_t, Node> found;
  if (!spec_.differentiate_composites) return found;
  const Matcher matcher(graph_);
  for (size_t n : order) {
    const std::string& op = graph_.nodes[n].op_type;
    std::optional<Fusion> chain;
    if (op == "ReduceMean") chain = match_decomposed_layer_norm(matcher, n);
    if (op == "Erf" || op == "Tanh") chain = match_gelu(matcher, n);
    if (op == "MatMul") chain = attention_composite(matcher, n);
    if (!chain) continue;
    bool asked_inside = false;
    for (size_t k : chain->nodes)
      for (const std::string& out : graph_.nodes[k].outputs)
        asked_inside =
            asked_inside || (k != chain->nodes.back() && (xs.count(out) || out == spec_.y));
    if (!asked_inside) found.emplace(chain->nodes.back(), std::move(chain->fused));
  }
  return found;
}

// The attention chain whose first MatMul is node `n` as one Attention node whose output 1 is
// the chain's Softmax result, which its rule reads: only when nothing outside the chain reads
// that result, and neither an added mask nor a scalar the chain folds into an attribute (a scale
// or a fill given as a trained initializer) depends on an x: the rule gives them no gradient.
std::optional<Fusion> GradientBuilder::attention_composite(const Matcher& matcher, size_t n) const {
  std::optional<Fusion> chain = match_attention(matcher, n);
  if (!chain || chain->fused.outputs.size() != 1) return std::nullopt;
  const Node& fused = chain->fused;
  if (fused.attr_string("mask", "") == "add" && depends_on_x_.count(fused.inputs[3]))
    return std::nullopt;
  std::unordered_set<std::string> read(fused.inputs.begin(), fused.inputs.end());
  for (size_t k : chain->nodes)
    for (const std::string& out : graph_.nodes[k].outputs) read.insert(out);
  for (size_t k : chain->nodes)
    for (const std::string& in : graph_.nodes[k].inputs)
      if (!read.count(in) && depends_on_x_.count(in)) return std::nullopt;
  chain->fused.outputs.push_back(attention_softmax(graph_, *chain).outputs[0]);
  return chain;
}

// Seeds dL/dy: the given dy, or ones shaped like y.
void GradientBuilder::seed_dy() {
  std::string seed = spec_.dy;
  if (seed.empty()) {
    auto dt = try_dtype(spec_.y);
    DPRUN_CHECK(dt.has_value(), "gradient: the element type of y '", spec_.y,
                "' is unknown, so ones cannot be built for dY");
    DPRUN_CHECK(onnx_opset() >= 9, "gradient: building ones for dY needs ai.onnx opset >= 9, ",
                "the graph imports ", onnx_opset());
    std::string shape = emit("seed", "Shape", {spec_.y}, 1, {})[0];
    Tensor one = scalar_tensor(1.0, *dt).reshape({1});
    seed = emit("seed", "ConstantOfShape", {shape}, 1, {{"value", Attribute::of_tensor(one)}})[0];
  }
  grads_[spec_.y].push_back(seed);
}

// Runs the node's gradient rule when a gradient reaches one of its outputs and one of its
// inputs wants one, and records the input gradients it emits.
void GradientBuilder::backpropagate(const Node& node) {
  std::vector<std::string> go;
  bool any_go = false;
  for (const auto& out : node.outputs) {
    go.push_back(out.empty() ? std::string() : accumulated(out));
    any_go = any_go || !go.back().empty();
  }
  if (!any_go) return;
  std::vector<bool> wants;
  bool any_wanted = false;
  for (const auto& in : node.inputs) {
    wants.push_back(wants_gradient(in));
    any_wanted = any_wanted || wants.back();
  }
  if (!any_wanted) return;
  // A composite may be a node of the rewrite domain (Gelu), which the graph does not import.
  const int64_t opset = node.domain == kRewriteDomain ? 1 : graph_.opset(node.domain);
  const GradientDef* def = GradientRegistry::instance().find(node.domain, node.op_type, opset);
  if (def == nullptr) {
    bool known = GradientRegistry::instance().knows_op(node.domain, node.op_type);
    node.fail("no gradient rule for ", node.op_type,
              known ? " at opset " + std::to_string(opset) : std::string());
  }
  GradientContext ctx(*this, node, go, wants);
  def->rule(ctx);
  const auto& gi = ctx.input_grads();
  for (size_t i = 0; i < gi.size(); ++i)
    if (!gi[i].empty() && wants[i]) grads_[node.inputs[i]].push_back(gi[i]);
}

// The accumulated gradient of x; zeros shaped like x when none reaches it and the spec asks
// for them.
std::string GradientBuilder::gradient_of_x(const std::string& x) {
  std::string g = accumulated(x);
  if (g.empty() && spec_.zeros_for_unreachable) {
    auto dt = try_dtype(x);
    DPRUN_CHECK(dt.has_value(), "gradient: the element type of x '", x,
                "' is unknown, so zeros cannot be built for its gradient");
    DPRUN_CHECK(graph_.opset("") >= 9, "gradient: no path leads from y to x '", x,
                "', and building zeros for its gradient needs ai.onnx opset >= 9");
    std::string shape = emit("zeros", "Shape", {x}, 1, {})[0];
    Tensor zero = scalar_tensor(0.0, *dt).reshape({1});
    g = emit("zeros", "ConstantOfShape", {shape}, 1, {{"value", Attribute::of_tensor(zero)}})[0];
  }
  return g;
}

GradientResult build_gradient(const Graph& graph, const GradientSpec& spec) {
  GradientBuilder builder(graph, spec);
  return builder.run();
}

// ---------------------------------------------------------------------------------------------
// GradientContext

GradientContext::GradientContext(GradientBuilder& builder, const Node& node,
                                 std::vector<std::string> go, std::vector<bool> wants)
    : builder_(builder),
      node_(node),
      go_(std::move(go)),
      wants_(std::move(wants)),
      gi_(node.inputs.size()) {}

int64_t GradientContext::opset() const {
  return builder_.graph().opset(node_.domain);
}
int64_t GradientContext::onnx_opset() const {
  return builder_.onnx_opset();
}

const std::string& GradientContext::I(size_t i) const {
  if (i >= node_.inputs.size()) fail("input ", i, " does not exist");
  return node_.inputs[i];
}
const std::string& GradientContext::O(size_t i) const {
  if (i >= node_.outputs.size()) fail("output ", i, " does not exist");
  return node_.outputs[i];
}
const std::string& GradientContext::GO(size_t i) const {
  static const std::string none;
  return i < go_.size() ? go_[i] : none;
}

void GradientContext::set_GI(size_t i, const std::string& value) {
  if (i >= gi_.size()) fail("input ", i, " does not exist");
  if (wants_GI(i)) gi_[i] = value;
}

std::vector<std::string> GradientContext::emit_n(const std::string& op_type,
                                                 std::vector<std::string> inputs, size_t outputs,
                                                 std::map<std::string, Attribute> attrs) {
  std::string scope = node_.name.empty() ? node_.op_type : node_.name;
  return builder_.emit(scope, op_type, std::move(inputs), outputs, std::move(attrs));
}

std::string GradientContext::emit(const std::string& op_type, std::vector<std::string> inputs,
                                  std::map<std::string, Attribute> attrs) {
  return emit_n(op_type, std::move(inputs), 1, std::move(attrs))[0];
}

std::string GradientContext::emit_in(const std::string& domain, const std::string& op_type,
                                     std::vector<std::string> inputs) {
  std::string scope = node_.name.empty() ? node_.op_type : node_.name;
  return builder_.emit(scope, op_type, std::move(inputs), 1, {}, domain)[0];
}

std::string GradientContext::constant(const Tensor& t) {
  return emit("Constant", {}, {{"value", Attribute::of_tensor(t)}});
}

Tensor scalar_tensor(double v, DType dtype) {
  if (dtype == DType::Float16) return Tensor::scalar<Float16>(Float16(static_cast<float>(v)));
  if (dtype == DType::BFloat16) return Tensor::scalar<BFloat16>(BFloat16(static_cast<float>(v)));
  return visit_numeric_dtype(dtype, [&](auto tag) {
    using T = decltype(tag);
    return Tensor::scalar<T>(static_cast<T>(v));
  });
}

std::string GradientContext::scalar(double v, DType dtype) {
  return constant(scalar_tensor(v, dtype));
}

std::string GradientContext::ints(const std::vector<int64_t>& v) {
  return constant(Tensor::from_vector<int64_t>({static_cast<int64_t>(v.size())}, v));
}

std::optional<TensorType> GradientContext::type_of(const std::string& value) const {
  return builder_.type_of(value);
}

DType GradientContext::dtype_of(const std::string& value) const {
  auto dt = builder_.try_dtype(value);
  if (!dt) fail("the element type of '", value, "' is unknown");
  return *dt;
}

std::optional<int64_t> GradientContext::rank_of(const std::string& value) const {
  if (auto c = constant_value(value)) return c->rank();
  auto t = type_of(value);
  if (!t || !t->shape) return std::nullopt;
  return static_cast<int64_t>(t->shape->size());
}

int64_t GradientContext::require_rank(const std::string& value) const {
  auto r = rank_of(value);
  if (!r) fail("the rank of '", value, "' is unknown (run shape inference on the graph)");
  return *r;
}

std::optional<Tensor> GradientContext::constant_value(const std::string& value) const {
  return builder_.constant_value(value);
}

std::string GradientContext::reduce_sum(const std::string& x, const std::vector<int64_t>& axes,
                                        bool keepdims) {
  if (axes.empty()) return x;
  std::map<std::string, Attribute> attrs{{"keepdims", Attribute::of_int(keepdims ? 1 : 0)}};
  if (onnx_opset() < 13) {
    attrs["axes"] = Attribute::of_ints(axes);
    return emit("ReduceSum", {x}, attrs);
  }
  return emit("ReduceSum", {x, ints(axes)}, attrs);
}

std::string GradientContext::unsqueeze(const std::string& x, const std::vector<int64_t>& axes) {
  if (axes.empty()) return x;
  if (onnx_opset() < 13) return emit("Unsqueeze", {x}, {{"axes", Attribute::of_ints(axes)}});
  return emit("Unsqueeze", {x, ints(axes)});
}

std::string GradientContext::squeeze(const std::string& x, const std::vector<int64_t>& axes) {
  if (axes.empty()) return x;
  if (onnx_opset() < 13) return emit("Squeeze", {x}, {{"axes", Attribute::of_ints(axes)}});
  return emit("Squeeze", {x, ints(axes)});
}

std::string GradientContext::reshape_like(const std::string& x, const std::string& like) {
  // Before opset 5 Reshape takes its shape as an attribute, fixed when the graph is built.
  if (onnx_opset() < 5) fail("reshaping needs ai.onnx opset >= 5 (Reshape's shape input)");
  return emit("Reshape", {x, emit("Shape", {like})});
}

std::string GradientContext::cast(const std::string& x, DType to) {
  return emit("Cast", {x}, {{"to", Attribute::of_int(static_cast<int64_t>(to))}});
}

std::string GradientContext::unbroadcast(const std::string& g, const std::string& out,
                                         const std::string& target) {
  std::optional<SymbolicShape> g_shape;
  if (auto t = type_of(out); t && t->shape) g_shape = t->shape;
  return reduce_to_shape_of(g, g_shape, target);
}

std::string GradientContext::reduce_to_shape_of(const std::string& g,
                                                std::optional<SymbolicShape> g_shape,
                                                const std::string& target) {
  // Decide statically when the declared shapes tell which axes were broadcast.
  std::optional<SymbolicShape> t_shape;
  if (auto c = constant_value(target)) {
    SymbolicShape s;
    for (int64_t d : c->shape()) s.push_back(Dim::known(d));
    t_shape = s;
  } else if (auto t = type_of(target); t && t->shape) {
    t_shape = t->shape;
  }
  if (g_shape && t_shape && t_shape->size() <= g_shape->size()) {
    const SymbolicShape& sg = *g_shape;
    const SymbolicShape& st = *t_shape;
    size_t lead = sg.size() - st.size();
    std::vector<int64_t> axes;
    for (size_t i = 0; i < lead; ++i) axes.push_back(static_cast<int64_t>(i));
    bool decided = true;
    for (size_t j = 0; j < st.size() && decided; ++j) {
      const Dim& a = st[j];
      const Dim& b = sg[lead + j];
      if (same_dim(a, b)) continue;
      if (a.is_known() && a.value == 1)
        axes.push_back(static_cast<int64_t>(lead + j));
      else if (!a.is_known())
        decided = false;  // the target's size could be 1: only the run time knows
    }
    if (decided) {
      if (axes.empty()) return g;
      if (static_cast<size_t>(axes.back()) < lead) return reduce_sum(g, axes, false);
      std::string r = reduce_sum(g, axes, true);
      return lead > 0 ? reshape_like(r, target) : r;
    }
  }
  if (onnx_opset() < 13)
    fail("cannot tell statically how '", target,
         "' was broadcast (shapes unknown), and the run-time reduction needs ai.onnx opset >= 13");
  // Run time: pad the target's shape with leading ones to g's rank and sum over every axis
  // where it is 1 (summing an axis that is 1 in g as well changes nothing).
  std::string g_dims = emit("Shape", {g});
  std::string t_dims = emit("Shape", {target});
  std::string pad = emit("Sub", {emit("Size", {g_dims}), emit("Size", {t_dims})});
  Tensor one = Tensor::from_vector<int64_t>({1}, {1});
  std::string ones = emit("ConstantOfShape", {emit("Reshape", {pad, ints({1})})},
                          {{"value", Attribute::of_tensor(one)}});
  std::string padded = emit("Concat", {ones, t_dims}, {{"axis", Attribute::of_int(0)}});
  std::string mask = emit("Equal", {padded, constant(one)});
  std::string axes = emit("Reshape", {emit("NonZero", {mask}), ints({-1})});
  std::string r =
      emit("ReduceSum", {g, axes},
           {{"keepdims", Attribute::of_int(1)}, {"noop_with_empty_axes", Attribute::of_int(1)}});
  return emit("Reshape", {r, t_dims});
}

}  // namespace dprun
