#include "engine/rewrites/max_pool_grad_fusion.h"

#include <climits>
#include <set>
#include <string>
#include <vector>

#include "engine/rewrites/graph_patterns.h"

namespace dprun {
namespace {

// True when `value` is ConstantOfShape's output with every element a float32 or float64 zero
// (the types the kernel computes in).
bool is_zeros(const Matcher& m, const std::string& value) {
  auto fill = m.producer(value, "ConstantOfShape");
  if (!fill) return false;
  const Node& n = m.graph().nodes[*fill];
  if (!n.has_attr("value")) return true;  // float32 zeros by default
  const Attribute& a = n.attributes.at("value");
  if (a.kind != Attribute::Kind::Tensor || a.t.numel() != 1) return false;
  return (a.t.dtype() == DType::Float32 || a.t.dtype() == DType::Float64) &&
         a.t.item_as_double(0) == 0.0;
}

// The phase counts of MaxPool node `pool` per spatial axis: windows that many outputs apart
// never overlap. Empty when its attributes give none.
std::vector<int64_t> phase_counts(const Node& pool) {
  const std::vector<int64_t> kernel = pool.attr_ints("kernel_shape", {});
  const size_t nd = kernel.size();
  const std::vector<int64_t> strides = pool.attr_ints("strides", std::vector<int64_t>(nd, 1));
  const std::vector<int64_t> dilations = pool.attr_ints("dilations", std::vector<int64_t>(nd, 1));
  if (nd == 0 || strides.size() != nd || dilations.size() != nd) return {};
  std::vector<int64_t> groups(nd);
  for (size_t a = 0; a < nd; ++a) {
    if (kernel[a] <= 0 || strides[a] <= 0 || dilations[a] <= 0) return {};
    const int64_t extent = (kernel[a] - 1) * dilations[a] + 1;
    groups[a] = (extent + strides[a] - 1) / strides[a];
  }
  return groups;
}

// One phase group's Slice: its source and constant starts, axes and steps.
struct PhaseSlice {
  std::string source;
  std::vector<int64_t> starts, axes, steps;
};

// The Slice behind Reshape(Slice(source, starts, ends, axes, steps), [-1]) with every end
// INT64_MAX, when only the Reshape reads the Slice; `chain` gets both nodes.
std::optional<PhaseSlice> phase_slice(const Matcher& m, const std::string& flat,
                                      std::vector<size_t>& chain) {
  const Graph& g = m.graph();
  auto reshape = m.producer(flat, "Reshape");
  if (!reshape || g.nodes[*reshape].inputs.size() != 2) return std::nullopt;
  auto shape = constant_ints(g, g.nodes[*reshape].inputs[1]);
  const std::string& sliced = g.nodes[*reshape].inputs[0];
  auto slice = m.producer(sliced, "Slice");
  if (!shape || *shape != std::vector<int64_t>{-1} || !slice || m.only_reader(sliced) != reshape)
    return std::nullopt;
  const Node& s = g.nodes[*slice];
  if (s.inputs.size() != 5) return std::nullopt;
  PhaseSlice p{s.inputs[0]};
  auto starts = constant_ints(g, s.inputs[1]);
  auto ends = constant_ints(g, s.inputs[2]);
  auto axes = constant_ints(g, s.inputs[3]);
  auto steps = constant_ints(g, s.inputs[4]);
  if (!starts || !ends || !axes || !steps || ends->size() != starts->size()) return std::nullopt;
  for (int64_t e : *ends)
    if (e != INT64_MAX) return std::nullopt;
  p.starts = *starts;
  p.axes = *axes;
  p.steps = *steps;
  chain.push_back(*slice);
  chain.push_back(*reshape);
  return p;
}

// True when the slices' axes and steps are the spatial axes of `pool` with more than one phase
// and their counts, and their starts are every phase exactly once.
bool covers_every_phase(const Node& pool, const std::vector<PhaseSlice>& slices) {
  const std::vector<int64_t> groups = phase_counts(pool);
  std::vector<int64_t> axes, steps;
  int64_t phases = 1;
  for (size_t a = 0; a < groups.size(); ++a)
    if (groups[a] > 1) {
      axes.push_back(static_cast<int64_t>(a) + 2);
      steps.push_back(groups[a]);
      phases *= groups[a];
    }
  if (axes.empty() || static_cast<int64_t>(slices.size()) != phases) return false;
  std::set<std::vector<int64_t>> seen;
  for (const PhaseSlice& s : slices) {
    if (s.axes != axes || s.steps != steps) return false;
    for (size_t k = 0; k < steps.size(); ++k)
      if (s.starts[k] < 0 || s.starts[k] >= steps[k]) return false;
    if (!seen.insert(s.starts).second) return false;
  }
  return true;
}

}  // namespace

std::optional<Fusion> match_max_pool_grad_scatter(const Matcher& m, size_t i) {
  const Graph& g = m.graph();
  const Node& sum = g.nodes[i];
  if (!sum.domain.empty() || sum.op_type != "Sum" || sum.inputs.size() < 2 ||
      sum.outputs.size() != 1)
    return std::nullopt;
  std::vector<size_t> chain = {i};
  std::vector<PhaseSlice> index_slices;
  std::string zeros, indices, updates;
  for (const std::string& part : sum.inputs) {
    auto scatter = m.producer(part, "ScatterElements");
    if (!scatter || m.only_reader(part) != i) return std::nullopt;
    const Node& s = g.nodes[*scatter];
    if (s.inputs.size() != 3 || s.attr_int("axis", 0) != 0 ||
        s.attr_string("reduction", "none") != "none" || (!zeros.empty() && s.inputs[0] != zeros))
      return std::nullopt;
    zeros = s.inputs[0];
    chain.push_back(*scatter);
    auto index_slice = phase_slice(m, s.inputs[1], chain);
    auto update_slice = phase_slice(m, s.inputs[2], chain);
    if (!index_slice || !update_slice || index_slice->starts != update_slice->starts ||
        index_slice->axes != update_slice->axes || index_slice->steps != update_slice->steps ||
        (!indices.empty() && (index_slice->source != indices || update_slice->source != updates)))
      return std::nullopt;
    indices = index_slice->source;
    updates = update_slice->source;
    index_slices.push_back(*index_slice);
  }
  // Each Reshape of a part must be read by its scatter alone.
  for (size_t k : chain)
    if (g.nodes[k].op_type == "Reshape" && !m.only_reader(g.nodes[k].outputs[0]))
      return std::nullopt;
  auto pool = m.producer(indices);
  if (!pool || !is_zeros(m, zeros)) return std::nullopt;
  const Node& p = g.nodes[*pool];
  if (!p.domain.empty() || p.op_type != "MaxPool" || p.outputs.size() != 2 ||
      p.outputs[1] != indices || p.attr_int("storage_order", 0) != 0 ||
      !covers_every_phase(p, index_slices))
    return std::nullopt;
  return Fusion{chain, fused_node(sum, "ScatterAdd", {zeros, indices, updates})};
}

}  // namespace dprun
