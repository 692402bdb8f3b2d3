#include "engine/rewrites/layer_norm_fusion.h"

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "engine/rewrites/graph_patterns.h"

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

}  // namespace

std::optional<Fusion> match_decomposed_layer_norm(const Matcher& m, size_t i) {
  const Graph& g = m.graph();
  const Node& mean = g.nodes[i];
  if (!mean.domain.empty() || mean.op_type != "ReduceMean" || mean.inputs.empty() ||
      mean.outputs.size() != 1)
    return std::nullopt;
  const std::string& x = mean.inputs[0];
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

}  // namespace dprun
