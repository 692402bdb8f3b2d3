#include "engine/layout_rule.h"

namespace dprun {
namespace {

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

}  // namespace

bool only_first_input(const Node& node) {
  for (size_t i = 1; i < node.inputs.size(); ++i)
    if (!node.inputs[i].empty()) return false;
  return true;
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

bool unary_runs_in_nhwc(const LayoutQuery& query) {
  // Inputs other than input 0 must be absent (Dropout with a ratio or training flag may draw
  // a layout-dependent mask; those stay in NCHW).
  return query.is_nhwc(query.node.inputs[0]) && only_first_input(query.node);
}

bool binary_runs_in_nhwc(const LayoutQuery& query) {
  // NHWC values are all 4-D, and broadcasting between two 4-D operands works per dimension,
  // so it commutes with permuting both. The legacy (opset < 7) `broadcast` attribute aligns
  // dims by `axis`: those only with equal shapes.
  const Node& n = query.node;
  return n.inputs.size() == 2 && query.is_nhwc(n.inputs[0]) && query.is_nhwc(n.inputs[1]) &&
         (!n.has_attr("broadcast") || same_shape(query.graph, n.inputs[0], n.inputs[1]));
}

}  // namespace dprun
