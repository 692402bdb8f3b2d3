#include "engine/rewrites/cross_entropy_grad_fusion.h"

#include <string>
#include <vector>

#include "engine/rewrites/graph_patterns.h"

namespace dprun {
namespace {

const std::string& out(const Graph& g, size_t k) {
  return g.nodes[k].outputs[0];
}

// True when ConstantOfShape node `k` fills with zeros (its default value is a float32 zero).
bool fills_zeros(const Graph& g, size_t k) {
  const Node& n = g.nodes[k];
  if (!n.has_attr("value")) return true;
  const Tensor& value = n.attributes.at("value").t;
  return value.numel() == 1 && is_floating(value.dtype()) && value.item_as_double(0) == 0.0;
}

}  // namespace

std::optional<Fusion> match_softmax_cross_entropy_grad(const Matcher& m, size_t i) {
  const Graph& g = m.graph();
  const Node& softmax = g.nodes[i];
  if (!softmax.domain.empty() || softmax.op_type != "Softmax" || g.opset("") < 13 ||
      softmax.inputs.size() != 1 || softmax.outputs.size() != 1 ||
      softmax.attr_int("axis", -1) != 1)
    return std::nullopt;
  const std::string& x = softmax.inputs[0];
  auto spread = m.only_reader(out(g, i), "Mul");
  auto scale = spread ? m.other_operand(*spread, out(g, i)) : std::nullopt;
  auto sum = spread ? m.only_reader(out(g, *spread), "Add") : std::nullopt;
  auto scattered = sum ? m.other_operand(*sum, out(g, *spread)) : std::nullopt;
  auto scatter = scattered ? m.producer(*scattered, "ScatterElements") : std::nullopt;
  if (!scale || !scatter || m.only_reader(*scattered) != sum) return std::nullopt;
  const Node& s = g.nodes[*scatter];
  if (s.inputs.size() != 3 || s.attr_int("axis", 0) != 1 ||
      s.attr_string("reduction", "none") != "none")
    return std::nullopt;
  auto negated = m.producer(s.inputs[2], "Neg");
  auto zeros = m.producer(s.inputs[0], "ConstantOfShape");
  if (!negated || g.nodes[*negated].inputs != std::vector<std::string>{*scale} ||
      m.only_reader(s.inputs[2]) != scatter || !zeros || !fills_zeros(g, *zeros) ||
      m.only_reader(s.inputs[0]) != scatter)
    return std::nullopt;
  auto shape = m.producer(g.nodes[*zeros].inputs[0], "Shape");
  if (!shape || g.nodes[*shape].inputs != std::vector<std::string>{x} ||
      g.nodes[*shape].has_attr("start") || g.nodes[*shape].has_attr("end"))
    return std::nullopt;
  std::vector<size_t> chain = {i, *spread, *negated, *zeros, *scatter, *sum};
  if (m.only_reader(out(g, *shape)) == zeros) chain.push_back(*shape);
  return Fusion{chain,
                fused_node(g.nodes[*sum], "SoftmaxCrossEntropyGrad", {x, s.inputs[1], *scale})};
}

}  // namespace dprun
