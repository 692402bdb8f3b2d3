#include "engine/rewrites/attention_fusion.h"

#include <algorithm>
#include <cmath>
#include <set>
#include <string>
#include <vector>

#include "engine/rewrites/graph_patterns.h"
#include "engine/rewrites/marked_region.h"

namespace dprun {
namespace {

bool is_plain(const Node& n, const char* op, size_t inputs) {
  return n.domain.empty() && n.op_type == op && n.inputs.size() == inputs && n.outputs.size() == 1;
}

/// The value of a one-element constant, or of a one-element value computed from such by Mul,
/// Div, Pow, Reciprocal, Sqrt, Cast to a floating type or Identity (GPT's scale, 1 / sqrt(d),
/// is exported unfolded), within a few nodes. A floating initializer is not one: it is a
/// parameter, which training (or a caller between runs) may change, and the fused node would
/// keep the value it had when the plan was built.
std::optional<double> folded_scalar(const Matcher& m, const std::string& value, int depth = 0) {
  const Graph& g = m.graph();
  if (const auto it = g.initializers.find(value);
      it != g.initializers.end() && is_floating(it->second.dtype()))
    return std::nullopt;
  if (auto c = constant_value(g, value)) {
    if (c->numel() != 1 || (!is_floating(c->dtype()) && !is_integral(c->dtype())))
      return std::nullopt;
    return c->item_as_double(0);
  }
  auto p = m.producer(value);
  if (!p || depth >= 6) return std::nullopt;
  const Node& n = g.nodes[*p];
  if (!n.domain.empty() || n.outputs.size() != 1) return std::nullopt;
  std::vector<double> args;
  for (const std::string& in : n.inputs) {
    auto v = in.empty() ? std::nullopt : folded_scalar(m, in, depth + 1);
    if (!v) return std::nullopt;
    args.push_back(*v);
  }
  const std::string& op = n.op_type;
  if (args.size() == 2 && op == "Mul") return args[0] * args[1];
  if (args.size() == 2 && op == "Div") return args[0] / args[1];
  if (args.size() == 2 && op == "Pow") return std::pow(args[0], args[1]);
  if (args.size() == 1 && op == "Reciprocal") return 1 / args[0];
  if (args.size() == 1 && op == "Sqrt") return std::sqrt(args[0]);
  if (args.size() == 1 && op == "Identity") return args[0];
  if (args.size() == 1 && op == "Cast" && is_floating(static_cast<DType>(n.attr_int("to", 0))))
    return args[0];
  return std::nullopt;
}

/// A Mul of a value by a scalar (either operand order) or a Div of it by one: the value and the
/// factor (1 / c for the Div).
struct Scaling {
  std::string operand;
  double factor;
};

std::optional<Scaling> scaling_of(const Matcher& m, const Node& n) {
  const bool div = is_plain(n, "Div", 2);
  if ((!div && !is_plain(n, "Mul", 2)) || n.inputs[0] == n.inputs[1]) return std::nullopt;
  if (auto c = folded_scalar(m, n.inputs[1])) return Scaling{n.inputs[0], div ? 1 / *c : *c};
  if (div) return std::nullopt;
  if (auto c = folded_scalar(m, n.inputs[0])) return Scaling{n.inputs[1], *c};
  return std::nullopt;
}

/// A permutation of r >= 3 dims, not the identity, keeping the stored last dim last or (unless
/// `last_stays_last`) second last: a view a product reads with one dim contiguous.
bool is_strided_view(const std::vector<int64_t>& perm, bool last_stays_last) {
  const auto r = static_cast<int64_t>(perm.size());
  if (r < 3) return false;
  std::vector<bool> seen(perm.size());
  bool identity = true;
  for (int64_t d = 0; d < r; ++d) {
    const int64_t p = perm[static_cast<size_t>(d)];
    if (p < 0 || p >= r || seen[static_cast<size_t>(p)]) return false;
    seen[static_cast<size_t>(p)] = true;
    identity = identity && p == d;
  }
  return !identity && (perm[r - 1] == r - 1 || (!last_stays_last && perm[r - 2] == r - 1));
}

/// An operand of the chain: the stored value, and the Transpose read through strides, if any.
struct Operand {
  std::string value;
  std::vector<int64_t> perm;
  std::optional<size_t> transpose;
};

/// `value` as read by node `reader`: the input of the Transpose producing it when `reader` is
/// that Transpose's only reader and the perm is a strided view.
Operand operand_of(const Matcher& m, const std::string& value, size_t reader) {
  const Graph& g = m.graph();
  auto t = m.producer(value, "Transpose");
  if (!t || m.only_reader(value) != reader || !g.nodes[*t].has_attr("perm"))
    return {value, {}, std::nullopt};
  const std::vector<int64_t> perm = g.nodes[*t].attr_ints("perm");
  if (!is_strided_view(perm, false)) return {value, {}, std::nullopt};
  return {g.nodes[*t].inputs[0], perm, t};
}

std::optional<size_t> declared_rank(const Graph& g, const std::string& value) {
  auto t = g.type_of(value);
  if (!t || !t->shape) return std::nullopt;
  return t->shape->size();
}

// The chain's rank, when every declared rank and perm agrees on one of at least 3, and the
// declared types tell that the chain computes in float32 (the kernels' type): one at least, and
// no other.
bool agrees_on_rank(const Graph& g, const std::vector<std::string>& values,
                    const std::vector<const std::vector<int64_t>*>& perms) {
  std::optional<size_t> rank;
  bool float32 = false;
  auto agree = [&](size_t r) {
    if (rank && *rank != r) return false;
    rank = r;
    return true;
  };
  for (const std::string& v : values) {
    if (auto r = declared_rank(g, v); r && !agree(*r)) return false;
    if (auto t = g.type_of(v); t && t->dtype != DType::Undefined) {
      if (t->dtype != DType::Float32) return false;
      float32 = true;
    }
  }
  for (const auto* p : perms)
    if (!p->empty() && !agree(p->size())) return false;
  return float32 && rank && *rank >= 3;
}

// False when the declared shapes of the operands, read through their perms, show batch dims
// that differ (a K or V broadcast over the heads): the kernel takes one batch shape.
bool batch_dims_may_agree(const Graph& g, const std::vector<const Operand*>& operands) {
  std::vector<std::optional<int64_t>> batch;
  for (const Operand* o : operands) {
    auto t = g.type_of(o->value);
    if (!t || !t->shape) continue;
    const size_t r = t->shape->size();
    for (size_t d = 0; d + 2 < r; ++d) {
      const Dim& dim = (*t->shape)[o->perm.empty() ? d : static_cast<size_t>(o->perm[d])];
      if (batch.size() <= d) batch.resize(d + 1);
      if (!dim.is_known()) continue;
      if (batch[d] && *batch[d] != dim.value) return false;
      batch[d] = dim.value;
    }
  }
  return true;
}

void set_perm(Node& n, const char* name, const std::vector<int64_t>& perm) {
  if (!perm.empty()) n.attributes[name] = Attribute::of_ints(perm);
}

// The forward chain's MatMuls found walking back from Softmax node `i` over at most a scaling
// and a mask.
void matmuls_before(const Matcher& m, const std::string& value, int hops,
                    std::vector<size_t>& found) {
  auto p = m.producer(value);
  if (!p) return;
  const Node& n = m.graph().nodes[*p];
  if (is_plain(n, "MatMul", 2)) found.push_back(*p);
  if (hops == 0 || !n.domain.empty() ||
      (n.op_type != "Mul" && n.op_type != "Div" && n.op_type != "Add" && n.op_type != "Where"))
    return;
  for (const std::string& in : n.inputs) matmuls_before(m, in, hops - 1, found);
}

}  // namespace

std::optional<Fusion> match_attention(const Matcher& m, size_t i) {
  const Graph& g = m.graph();
  const Node& mm1 = g.nodes[i];
  if (!is_plain(mm1, "MatMul", 2) || mm1.inputs[0] == mm1.inputs[1]) return std::nullopt;
  std::vector<size_t> nodes;
  double scale = 1;
  // q, scaled before the product or not.
  std::string q_value = mm1.inputs[0];
  size_t q_reader = i;
  if (auto s = m.producer(q_value); s && m.only_reader(q_value) == i) {
    if (auto scaled = scaling_of(m, g.nodes[*s])) {
      scale *= scaled->factor;
      nodes.push_back(*s);
      q_value = scaled->operand;
      q_reader = *s;
    }
  }
  const Operand q = operand_of(m, q_value, q_reader), k = operand_of(m, mm1.inputs[1], i);
  for (const Operand* o : {&q, &k})
    if (o->transpose) nodes.push_back(*o->transpose);
  nodes.push_back(i);
  // The scores: scaled, masked, then the Softmax.
  std::vector<std::string> chain_values = {q_value, mm1.inputs[1], mm1.outputs[0]};
  std::string s = mm1.outputs[0];
  auto next = m.only_reader(s);
  if (!next) return std::nullopt;
  if (auto scaled = scaling_of(m, g.nodes[*next]); scaled && scaled->operand == s) {
    scale *= scaled->factor;
    nodes.push_back(*next);
    s = g.nodes[*next].outputs[0];
    next = m.only_reader(s);
    if (!next) return std::nullopt;
  }
  Node attrs;
  std::vector<std::string> mask;
  const Node& masking = g.nodes[*next];
  if (is_plain(masking, "Add", 2)) {
    auto other = m.other_operand(*next, s);
    if (!other) return std::nullopt;
    attrs.attributes["mask"] = Attribute::of_string("add");
    mask = {*other};
  } else if (is_plain(masking, "Where", 3)) {
    const std::vector<std::string>& in = masking.inputs;
    if (in[0] == s || in[1] == in[2]) return std::nullopt;
    const bool fill_where_true = in[2] == s;
    if (!fill_where_true && in[1] != s) return std::nullopt;
    auto fill = folded_scalar(m, fill_where_true ? in[1] : in[2]);
    if (!fill) return std::nullopt;
    attrs.attributes["mask"] = Attribute::of_string("where");
    attrs.attributes["fill"] = Attribute::of_float(static_cast<float>(*fill));
    attrs.attributes["fill_where"] = Attribute::of_int(fill_where_true ? 1 : 0);
    mask = {in[0]};
  }
  if (!mask.empty()) {
    nodes.push_back(*next);
    s = masking.outputs[0];
    chain_values.push_back(s);
    next = m.only_reader(s);
    if (!next) return std::nullopt;
  }
  const Node& softmax = g.nodes[*next];
  if (!is_plain(softmax, "Softmax", 1)) return std::nullopt;
  const int64_t axis = softmax.attr_int("axis", g.opset("") < 13 ? 1 : -1);
  const std::optional<size_t> s_rank = declared_rank(g, s);
  if (axis != -1 && (!s_rank || axis != static_cast<int64_t>(*s_rank) - 1)) return std::nullopt;
  nodes.push_back(*next);
  // O = P v, and the Transpose after it.
  const std::string& p = softmax.outputs[0];
  std::optional<size_t> mm2;
  for (size_t r : m.readers(p))
    if (!mm2 && is_plain(g.nodes[r], "MatMul", 2) && g.nodes[r].inputs[0] == p &&
        g.nodes[r].inputs[1] != p)
      mm2 = r;
  if (!mm2) return std::nullopt;
  const bool p_outside = is_graph_result(g, p) || m.readers(p).size() > 1;
  const Operand v = operand_of(m, g.nodes[*mm2].inputs[1], *mm2);
  if (v.transpose) nodes.push_back(*v.transpose);
  size_t last = *mm2;
  std::vector<int64_t> perm_o;
  if (auto t = m.only_reader(g.nodes[*mm2].outputs[0], "Transpose");
      t && g.nodes[*t].has_attr("perm") && is_strided_view(g.nodes[*t].attr_ints("perm"), true)) {
    perm_o = g.nodes[*t].attr_ints("perm");
    nodes.push_back(*mm2);
    last = *t;
  }
  chain_values.insert(chain_values.end(), {p, q.value, k.value, v.value, g.nodes[*mm2].inputs[1]});
  chain_values.push_back(g.nodes[*mm2].outputs[0]);
  if (!agrees_on_rank(g, chain_values, {&q.perm, &k.perm, &v.perm, &perm_o}) ||
      !batch_dims_may_agree(g, {&q, &k, &v}))
    return std::nullopt;

  std::vector<std::string> inputs = {q.value, k.value, v.value};
  inputs.insert(inputs.end(), mask.begin(), mask.end());
  Node fused = fused_node(g.nodes[last], "Attention", inputs);
  fused.attributes = attrs.attributes;
  fused.attributes["scale"] = Attribute::of_float(static_cast<float>(scale));
  set_perm(fused, "perm_q", q.perm);
  set_perm(fused, "perm_k", k.perm);
  set_perm(fused, "perm_v", v.perm);
  set_perm(fused, "perm_o", perm_o);
  if (p_outside) fused.outputs.push_back(p);
  nodes.push_back(last);
  return Fusion{nodes, fused};
}

const Node& attention_softmax(const Graph& g, const Fusion& attention) {
  for (size_t k : attention.nodes)
    if (g.nodes[k].op_type == "Softmax") return g.nodes[k];
  fail("attention_softmax: the fusion holds no Softmax");
}

std::optional<Fusion> match_attention_grad(const Matcher& m, size_t i) {
  const Graph& g = m.graph();
  const Node& softmax = g.nodes[i];
  if (!is_plain(softmax, "Softmax", 1)) return std::nullopt;
  std::vector<size_t> matmuls;
  matmuls_before(m, softmax.inputs[0], 2, matmuls);
  std::optional<Fusion> forward;
  for (size_t k : matmuls) {
    forward = match_attention(m, k);
    if (forward && &attention_softmax(g, *forward) == &softmax) break;
    forward.reset();
  }
  if (!forward) return std::nullopt;
  const Node& fwd = forward->fused;
  auto q_type = g.type_of(fwd.inputs[0]);
  if (fwd.name.empty() || !q_type || q_type->dtype != DType::Float32) return std::nullopt;
  const std::vector<size_t> region =
      marked_region(g, fwd.name, kAttentionGradMagic, kAttentionGradTableSize);
  if (region.size() < 3) return std::nullopt;
  const std::vector<int64_t> table = region_table(g, region);
  if (table[1] != kAttentionGradVersion || !is_region_mark(g.nodes[region[0]])) return std::nullopt;
  // The received gradient's mark first; the given ones' last, before the table, in Q, K, V order.
  const std::string& d_out = g.nodes[region[0]].inputs[0];
  std::vector<std::string> given(3);
  size_t at = region.size() - 1;
  for (size_t k = 3; k-- > 0;) {
    if (table[2 + k] == 0) continue;
    if (at <= 1 || !is_region_mark(g.nodes[region[--at]])) return std::nullopt;
    given[k] = g.nodes[region[at]].outputs[0];
  }
  std::set<std::string> reads(fwd.inputs.begin(), fwd.inputs.end());
  reads.insert(softmax.outputs[0]);
  reads.insert(d_out);
  if (!region_is_closed(m, region, reads, std::set<std::string>(given.begin(), given.end())))
    return std::nullopt;

  Node fused;
  fused.name = fwd.name + "/grad";
  fused.domain = kRewriteDomain;
  fused.op_type = "AttentionGrad";
  fused.attributes = fwd.attributes;
  fused.inputs = {fwd.inputs[0], fwd.inputs[1], fwd.inputs[2], softmax.outputs[0], d_out};
  if (fwd.attr_string("mask", "") == "where") fused.inputs.push_back(fwd.inputs[3]);
  fused.outputs = given;
  while (!fused.outputs.empty() && fused.outputs.back().empty()) fused.outputs.pop_back();
  if (fused.outputs.empty()) return std::nullopt;
  return Fusion{region, fused};
}

}  // namespace dprun
