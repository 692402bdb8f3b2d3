#include "engine/autograd/shape_propagation.h"

#include <algorithm>

#include "engine/autograd/shape_rules.h"
#include "engine/op_facts.h"

namespace dprun {

namespace {

using Shape_ = std::optional<SymbolicShape>;

// The generic rules of ShapeKind; an op's own rules (OpFacts::shape_rule) sit beside its CPU
// kernel.
Shape_ broadcast(const ShapeQuery& q) {
  if (q.node.has_attr("broadcast")) return std::nullopt;  // legacy, axis-aligned broadcasting
  Shape_ result;
  for (size_t i = 0; i < q.node.inputs.size(); ++i) {
    auto s = q.input(i);
    if (!s) return std::nullopt;
    result = result ? broadcast_symbolic(*result, *s) : s;
    if (!result) return std::nullopt;
  }
  return result;
}

// [N, C, ...] of X's rank, with its batch; channels and spatial dims unknown.
Shape_ windowed(const ShapeQuery& q) {
  auto x = q.input(0);
  if (!x || x->size() < 2) return std::nullopt;
  SymbolicShape out = unknown_dims(x->size());
  out[0] = (*x)[0];
  return out;
}

// The weight's shape, from its value where it is constant; nullopt unless of X's rank.
Shape_ weight_of_rank(const ShapeQuery& q, size_t rank) {
  auto w = q.input(1);
  if (auto c = q.constant(1)) w = from_dims(c->shape());
  return w && w->size() == rank ? w : std::nullopt;
}

Shape_ convolution(const ShapeQuery& q) {
  auto out = q.output == 0 ? windowed(q) : std::nullopt;
  if (!out) return out;
  if (auto w = weight_of_rank(q, out->size())) (*out)[1] = (*w)[0];
  return out;
}

Shape_ transposed_convolution(const ShapeQuery& q) {
  auto out = q.output == 0 ? windowed(q) : std::nullopt;
  if (!out) return out;
  auto w = weight_of_rank(q, out->size());
  if (w && (*w)[1].is_known()) (*out)[1] = Dim::known((*w)[1].value * q.node.attr_int("group", 1));
  return out;
}

Shape_ pool(const ShapeQuery& q) {
  auto out = windowed(q);
  if (out) (*out)[1] = (*q.input(0))[1];
  return out;
}

Shape_ global_pool(const ShapeQuery& q) {
  auto out = q.output == 0 ? pool(q) : std::nullopt;
  if (out)
    for (size_t i = 2; i < out->size(); ++i) (*out)[i] = Dim::known(1);
  return out;
}

// Input 0 without `axes` (or with them as 1 under keepdims).
Shape_ without_axes(const SymbolicShape& x, const std::vector<int64_t>& axes, bool keepdims) {
  const int64_t rank = static_cast<int64_t>(x.size());
  std::vector<bool> reduced(x.size(), false);
  for (int64_t a : axes) {
    auto n = axis_in(a, rank);
    if (!n) return std::nullopt;
    reduced[static_cast<size_t>(*n)] = true;
  }
  SymbolicShape out;
  for (size_t i = 0; i < x.size(); ++i) {
    if (!reduced[i])
      out.push_back(x[i]);
    else if (keepdims)
      out.push_back(Dim::known(1));
  }
  return out;
}

// The Reduce* ops: axes from input 1 or the `axes` attribute, all of them when none is given.
Shape_ reduce_axes(const ShapeQuery& q) {
  const Node& node = q.node;
  auto x = q.input(0);
  if (!x || q.output != 0) return std::nullopt;
  const bool keepdims = node.attr_int("keepdims", 1) != 0;
  const bool axes_input = node.inputs.size() > 1 && !node.inputs[1].empty();
  auto given = q.ints_from(1, "axes");
  if (!given && axes_input)  // axes fed at run time: only keepdims tells the rank
    return keepdims ? Shape_(unknown_dims(x->size())) : std::nullopt;
  std::vector<int64_t> axes = given.value_or(std::vector<int64_t>{});
  if (axes.empty() && node.attr_int("noop_with_empty_axes", 0) != 0) return x;
  if (axes.empty())
    for (int64_t a = 0; a < static_cast<int64_t>(x->size()); ++a) axes.push_back(a);
  return without_axes(*x, axes, keepdims);
}

// ArgMax, ArgMin: the one axis of the `axis` attribute.
Shape_ reduce_axis(const ShapeQuery& q) {
  auto x = q.input(0);
  if (!x || q.output != 0) return std::nullopt;
  return without_axes(*x, {q.node.attr_int("axis", 0)}, q.node.attr_int("keepdims", 1) != 0);
}

Shape_ by_kind(ShapeKind kind, const ShapeQuery& q) {
  switch (kind) {
    case ShapeKind::SameAsInput0:
      return q.output == 0 ? q.input(0) : std::nullopt;
    case ShapeKind::Broadcast:
      return q.output == 0 ? broadcast(q) : std::nullopt;
    case ShapeKind::Convolution:
      return convolution(q);
    case ShapeKind::TransposedConvolution:
      return transposed_convolution(q);
    case ShapeKind::Pool:
      return pool(q);
    case ShapeKind::GlobalPool:
      return global_pool(q);
    case ShapeKind::SameRank: {
      auto x = q.input(0);
      return x ? Shape_(unknown_dims(x->size())) : std::nullopt;
    }
    case ShapeKind::ReduceAxes:
      return reduce_axes(q);
    case ShapeKind::ReduceAxis:
      return reduce_axis(q);
    case ShapeKind::None:
      break;
  }
  return std::nullopt;
}

}  // namespace

bool same_dim(const Dim& a, const Dim& b) {
  if (a.is_known() || b.is_known()) return a.is_known() && b.is_known() && a.value == b.value;
  return !a.symbol.empty() && a.symbol == b.symbol;
}

std::optional<SymbolicShape> broadcast_symbolic(const SymbolicShape& a, const SymbolicShape& b) {
  size_t rank = std::max(a.size(), b.size());
  SymbolicShape out(rank);
  for (size_t i = 0; i < rank; ++i) {
    const Dim* da = i + a.size() >= rank ? &a[i + a.size() - rank] : nullptr;
    const Dim* db = i + b.size() >= rank ? &b[i + b.size() - rank] : nullptr;
    if (!da || (db && da->is_known() && da->value == 1)) {
      out[i] = *db;
    } else if (!db || (db->is_known() && db->value == 1)) {
      out[i] = *da;
    } else if (da->is_known() || db->is_known()) {
      // A size other than 1 is the result: the other side is 1 or the same size.
      if (da->is_known() && db->is_known() && da->value != db->value) return std::nullopt;
      out[i] = da->is_known() ? *da : *db;
    } else if (same_dim(*da, *db)) {
      out[i] = *da;
    }  // else two symbols, either may be 1: unknown
  }
  return out;
}

std::optional<SymbolicShape> propagate_shape(const Node& node, size_t output,
                                             const ShapeSource& source) {
  if (!canonical_domain(node.domain).empty() || output >= node.outputs.size()) return std::nullopt;
  const OpFacts& facts = op_facts(node);
  const ShapeQuery query{node, output, source};
  return facts.shape_rule != nullptr ? facts.shape_rule(query) : by_kind(facts.shape, query);
}

}  // namespace dprun
