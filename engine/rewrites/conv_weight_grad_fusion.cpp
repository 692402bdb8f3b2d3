#include "engine/rewrites/conv_weight_grad_fusion.h"

#include <string>
#include <vector>

#include "engine/rewrites/graph_patterns.h"

namespace dprun {
namespace {

// True when `n` is a Transpose swapping the first two axes of a rank-`rank` value.
bool swaps_first_axes(const Node& n, size_t rank) {
  const std::vector<int64_t> perm = n.attr_ints("perm", {});
  if (perm.size() != rank) return false;
  for (size_t k = 0; k < rank; ++k)
    if (perm[k] != static_cast<int64_t>(k < 2 ? 1 - k : k)) return false;
  return true;
}

// The ends k when `slice` keeps [0, k) of each spatial axis of a rank-`rank` value and all of
// axes 0 and 1: starts 0, axes 2.., steps 1 (inputs from opset 10, attributes before).
std::optional<std::vector<int64_t>> spatial_crop(const Graph& g, const Node& slice, size_t rank) {
  std::optional<std::vector<int64_t>> starts, ends, axes, steps;
  if (g.opset("") >= 10) {
    const auto& in = slice.inputs;
    if (in.size() < 4 || in.size() > 5) return std::nullopt;
    starts = constant_ints(g, in[1]);
    ends = constant_ints(g, in[2]);
    axes = constant_ints(g, in[3]);
    if (in.size() == 5 && !in[4].empty()) steps = constant_ints(g, in[4]);
    if (in.size() == 5 && !in[4].empty() && !steps) return std::nullopt;
  } else {
    if (!slice.has_attr("axes")) return std::nullopt;
    starts = slice.attr_ints("starts", {});
    ends = slice.attr_ints("ends", {});
    axes = slice.attr_ints("axes");
  }
  const size_t spatial = rank - 2;
  if (!starts || !ends || !axes || starts->size() != spatial || ends->size() != spatial ||
      axes->size() != spatial || (steps && steps->size() != spatial))
    return std::nullopt;
  for (size_t k = 0; k < spatial; ++k)
    if ((*starts)[k] != 0 || (*ends)[k] <= 0 || (*axes)[k] != static_cast<int64_t>(k + 2) ||
        (steps && (*steps)[k] != 1))
      return std::nullopt;
  return ends;
}

// X's side of the chain: the value X and the chain's nodes that produce the Conv's operand from
// it, nearest the Conv first.
struct XOperand {
  std::string x;
  size_t rank = 0;  // X's
  std::vector<size_t> nodes;
};

// True when `n` is a Reshape (opset 5 on, allowzero 0) to the constant target `want`, where a
// `want` entry of -2 takes -1 or any positive size and gives it in `free`.
bool reshapes_to(const Graph& g, const Node& n, const std::vector<int64_t>& want, int64_t& free) {
  if (n.inputs.size() != 2 || n.attr_int("allowzero", 0) != 0) return false;
  auto target = constant_ints(g, n.inputs[1]);
  if (!target || target->size() != want.size()) return false;
  for (size_t k = 0; k < want.size(); ++k) {
    if (want[k] == -2 && ((*target)[k] == -1 || (*target)[k] > 0)) {
      free = (*target)[k];
    } else if ((*target)[k] != want[k]) {
      return false;
    }
  }
  return true;
}

// True when `n` (a Squeeze or Unsqueeze) works on axis 2 only.
bool on_axis_2(const Graph& g, const Node& n) {
  auto axes = axes_operand(g, n);
  return axes && *axes == std::vector<int64_t>{2};
}

// The group-1 operand: Transpose(X) swapping the first two axes.
std::optional<XOperand> swapped_x(const Matcher& m, const std::string& operand) {
  auto swap = m.producer(operand, "Transpose");
  if (!swap) return std::nullopt;
  const Node& t = m.graph().nodes[*swap];
  const size_t rank = t.attr_ints("perm", {}).size();
  if (rank < 3 || !swaps_first_axes(t, rank)) return std::nullopt;
  return XOperand{t.inputs[0], rank, {*swap}};
}

// The grouped operand, X [N, G*Ci, in...] regrouped to [Ci, G*N, in...] (ops/grad/
// conv_grad_util.h): Squeeze(Reshape(Transpose(Reshape(Unsqueeze(X, 2), [0, G, Ci, 0...]),
// [2, 1, 0, 3...]), [0, -1, 1, 0...]), 2), Ci positive or -1.
std::optional<XOperand> regrouped_x(const Matcher& m, const std::string& operand, int64_t group) {
  const Graph& g = m.graph();
  auto squeeze = m.producer(operand, "Squeeze");
  if (!squeeze || !on_axis_2(g, g.nodes[*squeeze])) return std::nullopt;
  auto merge = m.producer(g.nodes[*squeeze].inputs[0], "Reshape");
  if (!merge) return std::nullopt;
  auto turn = m.producer(g.nodes[*merge].inputs[0], "Transpose");
  if (!turn) return std::nullopt;
  const std::vector<int64_t> perm = g.nodes[*turn].attr_ints("perm", {});
  if (perm.size() < 4) return std::nullopt;
  const size_t rank = perm.size() - 1;  // X's rank, one less than the regrouped value's
  for (size_t k = 0; k < perm.size(); ++k)
    if (perm[k] != static_cast<int64_t>(k < 3 ? 2 - k : k)) return std::nullopt;
  auto split = m.producer(g.nodes[*turn].inputs[0], "Reshape");
  if (!split) return std::nullopt;
  auto unsqueeze = m.producer(g.nodes[*split].inputs[0], "Unsqueeze");
  if (!unsqueeze || !on_axis_2(g, g.nodes[*unsqueeze])) return std::nullopt;
  std::vector<int64_t> merge_to = {0, -1, 1}, split_to = {0, group, -2};
  merge_to.resize(rank + 1, 0);
  split_to.resize(rank + 1, 0);
  int64_t ci = -1, unused = 0;
  if (!reshapes_to(g, g.nodes[*merge], merge_to, unused) ||
      !reshapes_to(g, g.nodes[*split], split_to, ci))
    return std::nullopt;
  XOperand x{g.nodes[*unsqueeze].inputs[0], rank, {*squeeze, *merge, *turn, *split, *unsqueeze}};
  // A Ci the channels do not give makes the chain fail; the fused node must not compute.
  auto x_type = g.type_of(x.x);
  if (ci > 0 && x_type && x_type->shape && x_type->shape->size() > 1 &&
      (*x_type->shape)[1].is_known() && (*x_type->shape)[1].value != ci * group)
    return std::nullopt;
  return x;
}

// The operand nodes that go with the chain: from the Conv's operand up, while each value is
// read by the chain alone.
std::vector<size_t> owned_operand_nodes(const Matcher& m, size_t conv, const XOperand& x) {
  std::vector<size_t> owned;
  size_t reader = conv;
  for (size_t n : x.nodes) {
    if (m.only_reader(m.graph().nodes[n].outputs[0]) != reader) break;
    owned.push_back(n);
    reader = n;
  }
  return owned;
}

}  // namespace

std::optional<Fusion> match_conv_weight_grad(const Matcher& m, size_t i) {
  const Graph& g = m.graph();
  const Node& conv = g.nodes[i];
  const int64_t group = conv.attr_int("group", 1);
  if (!conv.domain.empty() || conv.op_type != "Conv" || conv.inputs.size() != 2 ||
      conv.outputs.size() != 1 || conv.inputs[0] == conv.inputs[1] || group < 1 ||
      conv.attr_string("auto_pad", "NOTSET") != "NOTSET" || conv.has_attr("kernel_shape"))
    return std::nullopt;
  auto x_side = group == 1 ? swapped_x(m, conv.inputs[0]) : regrouped_x(m, conv.inputs[0], group);
  auto dy_swap = m.producer(conv.inputs[1], "Transpose");
  if (!x_side || !dy_swap) return std::nullopt;
  const std::string& x = x_side->x;
  const std::string& dy = g.nodes[*dy_swap].inputs[0];
  // Every ConvWeightGrad kernel computes in float32: one operand's type must be known to be
  // that, and neither may be known as another. The Conv's operands share one type, so dY's
  // tells where X's is not known (the weight gradient of a ConvTranspose reads its output
  // gradient as X); a known other type of either (a 16-bit training graph) keeps the chain.
  auto dtype_of = [&](const std::string& v) -> std::optional<DType> {
    auto t = g.type_of(v);
    if (!t || t->dtype == DType::Undefined) return std::nullopt;
    return t->dtype;
  };
  const std::optional<DType> x_type = dtype_of(x), dy_type = dtype_of(dy);
  if ((!x_type && !dy_type) || x_type.value_or(DType::Float32) != DType::Float32 ||
      dy_type.value_or(DType::Float32) != DType::Float32)
    return std::nullopt;
  const size_t rank = x_side->rank;
  if (!swaps_first_axes(g.nodes[*dy_swap], rank)) return std::nullopt;
  const size_t nd = rank - 2;
  auto slice = m.only_reader(conv.outputs[0], "Slice");
  if (!slice) return std::nullopt;
  auto kernel = spatial_crop(g, g.nodes[*slice], rank);
  auto back = m.only_reader(g.nodes[*slice].outputs[0], "Transpose");
  if (!kernel || !back || !swaps_first_axes(g.nodes[*back], rank)) return std::nullopt;

  // The forward convolution's geometry: the weight-gradient Conv exchanges strides and
  // dilations and keeps the pads.
  const std::vector<int64_t> strides = conv.attr_ints("dilations", std::vector<int64_t>(nd, 1));
  const std::vector<int64_t> dilations = conv.attr_ints("strides", std::vector<int64_t>(nd, 1));
  const std::vector<int64_t> pads = conv.attr_ints("pads", std::vector<int64_t>(2 * nd, 0));
  if (strides.size() != nd || dilations.size() != nd || pads.size() != 2 * nd) return std::nullopt;
  for (size_t k = 0; k < nd; ++k)
    if (strides[k] <= 0 || dilations[k] <= 0 || pads[k] < 0 || pads[k + nd] < 0)
      return std::nullopt;

  Fusion f{{i, *slice, *back}, fused_node(g.nodes[*back], "ConvWeightGrad", {x, dy})};
  f.fused.attributes["kernel_shape"] = Attribute::of_ints(*kernel);
  f.fused.attributes["strides"] = Attribute::of_ints(strides);
  f.fused.attributes["dilations"] = Attribute::of_ints(dilations);
  f.fused.attributes["pads"] = Attribute::of_ints(pads);
  if (group != 1) f.fused.attributes["group"] = Attribute::of_int(group);
  for (size_t n : owned_operand_nodes(m, i, *x_side)) f.nodes.push_back(n);
  if (m.only_reader(conv.inputs[1]) == i) f.nodes.push_back(*dy_swap);
  return f;
}

}  // namespace dprun
