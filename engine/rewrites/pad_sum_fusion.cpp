#include "engine/rewrites/pad_sum_fusion.h"

#include <vector>

#include "engine/rewrites/graph_patterns.h"

namespace dprun {
namespace {

/// The constant pads of Pad node `n` ([begins..., ends...]), nullopt when they are not known when
/// the graph is compiled or the Pad is not a zero padding.
std::optional<std::vector<int64_t>> zero_pads(const Graph& g, const Node& n) {
  if (n.attr_string("mode", "constant") != "constant") return std::nullopt;
  if (n.has_attr("pads")) {  // opsets 2-10
    if (n.attr_float("value", 0.f) != 0.f) return std::nullopt;
    return n.attr_ints("pads");
  }
  if (n.inputs.size() < 2 || n.inputs.size() > 3 || n.inputs[1].empty()) return std::nullopt;
  if (n.inputs.size() == 3 && !n.inputs[2].empty()) {
    const auto value = constant_scalar(g, n.inputs[2]);
    if (!value || *value != 0.f) return std::nullopt;
  }
  const auto pads = constant_value(g, n.inputs[1]);
  if (!pads || pads->dtype() != DType::Int64) return std::nullopt;
  return std::vector<int64_t>(pads->data<int64_t>(), pads->data<int64_t>() + pads->numel());
}

/// The one axis `pads` pads along (-1: none or several), with its leading and trailing pads.
int64_t padded_axis(const std::vector<int64_t>& pads, int64_t& begin, int64_t& end) {
  const size_t rank = pads.size() / 2;
  int64_t axis = -1;
  for (size_t d = 0; d < rank; ++d) {
    if (pads[d] < 0 || pads[d + rank] < 0) return -1;
    if (pads[d] == 0 && pads[d + rank] == 0) continue;
    if (axis != -1) return -1;
    axis = static_cast<int64_t>(d);
    begin = pads[d];
    end = pads[d + rank];
  }
  return axis;
}

}  // namespace

std::optional<Fusion> match_pad_sum(const Matcher& m, size_t i) {
  const Graph& g = m.graph();
  const Node& sum = g.nodes[i];
  if (sum.inputs.size() < 2 || sum.outputs.size() != 1) return std::nullopt;
  Fusion fusion{{}, fused_node(sum, "PadSum", {})};
  std::vector<int64_t> begins, ends;
  int64_t axis = -1;
  size_t rank = 0;
  for (const std::string& value : sum.inputs) {
    const auto pad = m.producer(value, "Pad");
    if (!pad || m.only_reader(value) != i) return std::nullopt;
    for (size_t earlier : fusion.nodes)
      if (earlier == *pad) return std::nullopt;  // one Pad summed twice
    const Node& n = g.nodes[*pad];
    const auto pads = zero_pads(g, n);
    int64_t begin = 0, end = 0;
    if (!pads || pads->empty() || pads->size() % 2 != 0) return std::nullopt;
    const int64_t along = padded_axis(*pads, begin, end);
    if (along == -1 || (axis != -1 && (along != axis || pads->size() / 2 != rank)))
      return std::nullopt;
    axis = along;
    rank = pads->size() / 2;
    begins.push_back(begin);
    ends.push_back(end);
    fusion.nodes.push_back(*pad);
    fusion.fused.inputs.push_back(n.inputs[0]);
    if (n.inputs.size() > 1)  // the pads' Constant, when only this Pad reads it
      if (auto c = m.producer(n.inputs[1], "Constant"); c && m.only_reader(n.inputs[1]) == *pad)
        fusion.nodes.push_back(*c);
  }
  fusion.fused.attributes["axis"] = Attribute::of_int(axis);
  fusion.fused.attributes["begins"] = Attribute::of_ints(begins);
  fusion.fused.attributes["ends"] = Attribute::of_ints(ends);
  fusion.nodes.push_back(i);
  return fusion;
}

}  // namespace dprun
