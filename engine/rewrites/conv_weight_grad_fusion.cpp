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

}  // namespace

std::optional<Fusion> match_conv_weight_grad(const Matcher& m, size_t i) {
  const Graph& g = m.graph();
  const Node& conv = g.nodes[i];
  if (!conv.domain.empty() || conv.op_type != "Conv" || conv.inputs.size() != 2 ||
      conv.outputs.size() != 1 || conv.inputs[0] == conv.inputs[1] ||
      conv.attr_int("group", 1) != 1 || conv.attr_string("auto_pad", "NOTSET") != "NOTSET" ||
      conv.has_attr("kernel_shape"))
    return std::nullopt;
  auto x_swap = m.producer(conv.inputs[0], "Transpose");
  auto dy_swap = m.producer(conv.inputs[1], "Transpose");
  if (!x_swap || !dy_swap) return std::nullopt;
  const std::string& x = g.nodes[*x_swap].inputs[0];
  const std::string& dy = g.nodes[*dy_swap].inputs[0];
  // A backend fuses only where it has a kernel for the operands' type: it must be known.
  auto x_type = g.type_of(x);
  if (!x_type || x_type->dtype == DType::Undefined) return std::nullopt;
  const size_t rank = g.nodes[*x_swap].attr_ints("perm", {}).size();
  if (rank < 3 || !swaps_first_axes(g.nodes[*x_swap], rank) ||
      !swaps_first_axes(g.nodes[*dy_swap], rank))
    return std::nullopt;
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
  if (m.only_reader(conv.inputs[0]) == i) f.nodes.push_back(*x_swap);
  if (m.only_reader(conv.inputs[1]) == i) f.nodes.push_back(*dy_swap);
  return f;
}

}  // namespace dprun
