#include "engine/rewrites/layer_norm_fusion.h"

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "engine/rewrites/graph_patterns.h"
#include "engine/rewrites/rewrite_domain.h"

namespace dprun {
namespace {

const std::string& out(const Graph& g, size_t k) {
  return g.nodes[k].outputs[0];
}

// The number of trailing axes reduction node `k` runs over with keepdims, each axis once, given
// as negative axes or as non-negative ones of X's declared `rank`; nullopt for any other axes.
std::optional<int64_t> trailing_axes(const Graph& g, size_t k, std::optional<int64_t> rank) {
  const Node& n = g.nodes[k];
  if (n.attr_int("keepdims", 1) != 1) return std::nullopt;
  auto axes = axes_operand(g, n);
  if (!axes || axes->empty()) return std::nullopt;
  const auto count = static_cast<int64_t>(axes->size());
  std::vector<int64_t> from_end;
  for (int64_t a : *axes) {
    if (a >= 0 && !rank) return std::nullopt;
    from_end.push_back(a < 0 ? a : a - *rank);
  }
  std::sort(from_end.begin(), from_end.end());
  for (int64_t j = 0; j < count; ++j)
    if (from_end[static_cast<size_t>(j)] != j - count) return std::nullopt;
  if (rank && count > *rank) return std::nullopt;
  return count;
}

// True when `value` is a floating value whose declared rank is at most `k`: it broadcasts over
// the normalized axes alone, as LayerNormalization's Scale and B do.
bool is_parameter_of_rank_at_most(const Graph& g, const std::string& value, int64_t k) {
  auto t = g.type_of(value);
  return t && is_floating(t->dtype) && t->shape && static_cast<int64_t>(t->shape->size()) <= k;
}

// The node reading `value` alone, a binary `op` with `value` as one operand, and that operand's
// partner: the Mul by Scale or the Add of B, in either order.
std::optional<std::pair<size_t, std::string>> binary_reader(const Matcher& m,
                                                            const std::string& value,
                                                            const char* op) {
  auto reader = m.only_reader(value, op);
  if (!reader) return std::nullopt;
  auto other = m.other_operand(*reader, value);
  if (!other) return std::nullopt;
  return std::make_pair(*reader, *other);
}

// True when node `k` is a plain ai.onnx ReduceMean with an input and one output: where both
// chains start.
bool is_reduce_mean_of_a_value(const Graph& g, size_t k) {
  const Node& n = g.nodes[k];
  return n.domain.empty() && n.op_type == "ReduceMean" && !n.inputs.empty() &&
         n.outputs.size() == 1;
}

}  // namespace

std::optional<Fusion> match_decomposed_layer_norm(const Matcher& m, size_t i) {
  const Graph& g = m.graph();
  if (!is_reduce_mean_of_a_value(g, i)) return std::nullopt;
  const std::string& x = g.nodes[i].inputs[0];
  std::optional<int64_t> rank;
  if (auto t = g.type_of(x)) {
    if (t->dtype != DType::Undefined && !is_floating(t->dtype)) return std::nullopt;
    if (t->shape) rank = static_cast<int64_t>(t->shape->size());
  }
  const std::optional<int64_t> k = trailing_axes(g, i, rank);
  auto sub = m.only_reader(out(g, i), "Sub");
  if (!k || !sub || g.nodes[*sub].inputs != std::vector<std::string>{x, out(g, i)})
    return std::nullopt;
  // d = X - mean has two readers: the square and the Div.
  const std::string& d = out(g, *sub);
  const std::vector<size_t>& readers = m.readers(d);
  if (readers.size() != 2 || is_graph_result(g, d)) return std::nullopt;
  std::optional<size_t> square, div;
  for (size_t r : readers) {
    const Node& n = g.nodes[r];
    if (!n.domain.empty() || n.outputs.size() != 1 || n.inputs.size() != 2) return std::nullopt;
    if (n.op_type == "Div" && n.inputs[0] == d && n.inputs[1] != d)
      div = r;
    else if ((n.op_type == "Pow" && n.inputs[0] == d && floating_scalar(g, n.inputs[1]) == 2.0) ||
             (n.op_type == "Mul" && n.inputs[0] == d && n.inputs[1] == d))
      square = r;
  }
  if (!square || !div) return std::nullopt;
  auto var = m.only_reader(out(g, *square), "ReduceMean");
  if (!var || g.nodes[*var].inputs[0] != out(g, *square) || trailing_axes(g, *var, rank) != k)
    return std::nullopt;
  auto add = binary_reader(m, out(g, *var), "Add");
  if (!add) return std::nullopt;
  const std::optional<double> epsilon = floating_scalar(g, add->second);
  auto sqrt = m.only_reader(out(g, add->first), "Sqrt");
  if (!epsilon || !(*epsilon >= 0) || !sqrt || m.only_reader(out(g, *sqrt)) != div ||
      g.nodes[*div].inputs[1] != out(g, *sqrt))
    return std::nullopt;
  auto scaled = binary_reader(m, out(g, *div), "Mul");
  if (!scaled || !is_parameter_of_rank_at_most(g, scaled->second, *k)) return std::nullopt;
  std::vector<size_t> chain = {i, *sub, *square, *var, add->first, *sqrt, *div, scaled->first};
  std::vector<std::string> inputs = {x, scaled->second};
  auto shifted = binary_reader(m, out(g, scaled->first), "Add");
  if (shifted && is_parameter_of_rank_at_most(g, shifted->second, *k)) {
    chain.push_back(shifted->first);
    inputs.push_back(shifted->second);
  }
  const Node& last = g.nodes[chain.back()];
  Node fused;
  fused.name = last.name;
  fused.op_type = "LayerNormalization";
  fused.inputs = std::move(inputs);
  fused.outputs = last.outputs;
  fused.attributes = {{"axis", Attribute::of_int(-*k)},
                      {"epsilon", Attribute::of_float(static_cast<float>(*epsilon))}};
  return Fusion{chain, fused};
}

namespace {

// True when node `k` is a plain ai.onnx `op` node with one output reading exactly `inputs`.
bool reads(const Graph& g, size_t k, const char* op, const std::vector<std::string>& inputs) {
  const Node& n = g.nodes[k];
  return n.domain.empty() && n.op_type == op && n.outputs.size() == 1 && n.inputs == inputs;
}

// The readers of `value`, which must be exactly `count` and no graph result.
std::optional<std::vector<size_t>> readers_exactly(const Matcher& m, const std::string& value,
                                                   size_t count) {
  const std::vector<size_t>& r = m.readers(value);
  if (r.size() != count || is_graph_result(m.graph(), value)) return std::nullopt;
  return r;
}

// The one of `nodes` that reads exactly `inputs` as an `op`.
std::optional<size_t> one_reading(const Graph& g, const std::vector<size_t>& nodes, const char* op,
                                  const std::vector<std::string>& inputs) {
  for (size_t k : nodes)
    if (reads(g, k, op, inputs)) return k;
  return std::nullopt;
}

// The statistics part of the gradient: centered, inv and xhat from the ReduceMean of X, node `i`.
struct GradStatistics {
  std::vector<size_t> nodes;
  std::string centered, inv;
  size_t xhat = 0;
  double epsilon = 0;
};

std::optional<GradStatistics> grad_statistics(const Matcher& m, size_t i, int64_t k,
                                              std::optional<int64_t> rank) {
  const Graph& g = m.graph();
  const std::string& x = g.nodes[i].inputs[0];
  auto sub = m.only_reader(out(g, i), "Sub");
  if (!sub || !reads(g, *sub, "Sub", {x, out(g, i)})) return std::nullopt;
  GradStatistics s;
  s.centered = out(g, *sub);
  auto centered_readers = readers_exactly(m, s.centered, 2);
  if (!centered_readers) return std::nullopt;
  auto square = one_reading(g, *centered_readers, "Mul", {s.centered, s.centered});
  if (!square) return std::nullopt;
  auto var = m.only_reader(out(g, *square), "ReduceMean");
  if (!var || trailing_axes(g, *var, rank) != k) return std::nullopt;
  auto add = binary_reader(m, out(g, *var), "Add");
  if (!add || g.nodes[add->first].inputs[0] != out(g, *var)) return std::nullopt;
  const std::optional<double> epsilon = floating_scalar(g, add->second);
  if (!epsilon || !(*epsilon >= 0)) return std::nullopt;
  auto sqrt = m.only_reader(out(g, add->first), "Sqrt");
  if (!sqrt) return std::nullopt;
  auto inv = m.only_reader(out(g, *sqrt), "Reciprocal");
  if (!inv) return std::nullopt;
  s.inv = out(g, *inv);
  auto xhat = one_reading(g, *centered_readers, "Mul", {s.centered, s.inv});
  if (!xhat) return std::nullopt;
  s.xhat = *xhat;
  s.epsilon = *epsilon;
  s.nodes = {i, *sub, *square, *var, add->first, *sqrt, *inv, *xhat};
  return s;
}

}  // namespace

std::optional<Fusion> match_layer_norm_grad(const Matcher& m, size_t i) {
  const Graph& g = m.graph();
  if (!is_reduce_mean_of_a_value(g, i)) return std::nullopt;
  const std::string& x = g.nodes[i].inputs[0];
  auto x_type = g.type_of(x);
  if (!x_type || x_type->dtype != DType::Float32) return std::nullopt;
  std::optional<int64_t> rank;
  if (x_type->shape) rank = static_cast<int64_t>(x_type->shape->size());
  const std::optional<int64_t> k = trailing_axes(g, i, rank);
  if (!k) return std::nullopt;
  std::optional<GradStatistics> s = grad_statistics(m, i, *k, rank);
  if (!s) return std::nullopt;
  const std::string& xhat = out(g, s->xhat);
  // inv's other reader is dX = inv * c2, c2 = (dxhat - mean(dxhat)) - xhat * mean(dxhat * xhat).
  auto inv_readers = readers_exactly(m, s->inv, 2);
  if (!inv_readers) return std::nullopt;
  const size_t dx = (*inv_readers)[0] == s->xhat ? (*inv_readers)[1] : (*inv_readers)[0];
  const Node& dx_node = g.nodes[dx];
  if (!reads(g, dx, "Mul", {s->inv, dx_node.inputs.size() == 2 ? dx_node.inputs[1] : ""}))
    return std::nullopt;
  auto c2 = m.producer(dx_node.inputs[1], "Sub");
  if (!c2 || m.only_reader(dx_node.inputs[1]) != dx) return std::nullopt;
  auto s1 = m.producer(g.nodes[*c2].inputs[0], "Sub");
  auto proj = m.producer(g.nodes[*c2].inputs[1], "Mul");
  if (!s1 || !proj || m.only_reader(out(g, *s1)) != c2 || m.only_reader(out(g, *proj)) != c2)
    return std::nullopt;
  const std::string& dxhat = g.nodes[*s1].inputs[0];
  auto m1 = m.producer(g.nodes[*s1].inputs[1], "ReduceMean");
  auto dxhat_node = m.producer(dxhat, "Mul");
  if (!m1 || !dxhat_node || !reads(g, *m1, "ReduceMean", {dxhat}) ||
      trailing_axes(g, *m1, rank) != k || m.only_reader(out(g, *m1)) != s1)
    return std::nullopt;
  auto m2 = m.producer(g.nodes[*proj].inputs[1], "ReduceMean");
  if (!m2 || !reads(g, *proj, "Mul", {xhat, out(g, *m2)}) || trailing_axes(g, *m2, rank) != k ||
      m.only_reader(out(g, *m2)) != proj)
    return std::nullopt;
  auto product = m.producer(g.nodes[*m2].inputs[0], "Mul");
  if (!product || !reads(g, *product, "Mul", {dxhat, xhat}) ||
      m.only_reader(out(g, *product)) != m2)
    return std::nullopt;
  auto dxhat_readers = readers_exactly(m, dxhat, 3);
  const Node& scaling = g.nodes[*dxhat_node];
  if (!dxhat_readers || scaling.inputs.size() != 2 ||
      !is_parameter_of_rank_at_most(g, scaling.inputs[1], *k))
    return std::nullopt;
  // xhat's readers inside the chain: the product, the projection; any other is outside.
  bool read_outside = is_graph_result(g, xhat);
  for (size_t r : m.readers(xhat)) read_outside = read_outside || (r != *product && r != *proj);
  std::vector<size_t> chain = s->nodes;
  chain.insert(chain.end(), {*dxhat_node, *product, *m2, *proj, *m1, *s1, *c2, dx});
  Node fused;
  fused.name = dx_node.name;
  fused.domain = kRewriteDomain;
  fused.op_type = "LayerNormGrad";
  fused.inputs = {x, scaling.inputs[0], scaling.inputs[1]};
  fused.outputs = {dx_node.outputs[0], read_outside ? xhat : std::string()};
  if (!read_outside) fused.outputs.pop_back();
  fused.attributes = {{"axis", Attribute::of_int(-*k)},
                      {"epsilon", Attribute::of_float(static_cast<float>(s->epsilon))}};
  return Fusion{chain, fused};
}

}  // namespace dprun
