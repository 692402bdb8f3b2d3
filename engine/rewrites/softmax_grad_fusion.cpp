#include "engine/rewrites/softmax_grad_fusion.h"

#include <string>
#include <vector>

#include "engine/rewrites/graph_patterns.h"

namespace dprun {
namespace {

const std::string& out(const Graph& g, size_t k) {
  return g.nodes[k].outputs[0];
}

// The one axis that ReduceSum node `k` sums over with keepdims, or nullopt.
std::optional<int64_t> single_axis(const Graph& g, size_t k) {
  const Node& n = g.nodes[k];
  if (n.inputs.empty() || n.attr_int("keepdims", 1) != 1) return std::nullopt;
  auto axes = axes_operand(g, n);
  if (!axes || axes->size() != 1) return std::nullopt;
  return (*axes)[0];
}

Node grad_node(const Node& last, const char* op, const std::string& dy, const std::string& y,
               int64_t axis) {
  Node n = fused_node(last, op, {dy, y});
  n.attributes["axis"] = Attribute::of_int(axis);
  return n;
}

}  // namespace

std::optional<Fusion> match_softmax_grad(const Matcher& m, size_t i) {
  const Graph& g = m.graph();
  const Node& sum = g.nodes[i];
  if (!sum.domain.empty() || sum.op_type != "ReduceSum" || sum.outputs.size() != 1)
    return std::nullopt;
  const std::optional<int64_t> axis = single_axis(g, i);
  auto product = axis ? m.producer(sum.inputs[0], "Mul") : std::nullopt;
  if (!product || m.only_reader(sum.inputs[0]) != i) return std::nullopt;
  const std::vector<std::string>& factors = g.nodes[*product].inputs;
  if (factors.size() != 2 || factors[0] == factors[1]) return std::nullopt;
  // dY - sum: dY is the factor the Sub reads, Y the other.
  auto diff = m.only_reader(out(g, i), "Sub");
  if (!diff || g.nodes[*diff].inputs.size() != 2 || g.nodes[*diff].inputs[1] != out(g, i))
    return std::nullopt;
  const std::string& dy = g.nodes[*diff].inputs[0];
  auto y = m.other_operand(*product, dy);
  if (!y) return std::nullopt;
  auto dx = m.only_reader(out(g, *diff), "Mul");
  if (!dx || m.other_operand(*dx, out(g, *diff)) != y) return std::nullopt;
  return Fusion{{*product, i, *diff, *dx}, grad_node(g.nodes[*dx], "SoftmaxGrad", dy, *y, *axis)};
}

std::optional<Fusion> match_log_softmax_grad(const Matcher& m, size_t i) {
  const Graph& g = m.graph();
  const Node& exp = g.nodes[i];
  if (!exp.domain.empty() || exp.op_type != "Exp" || exp.inputs.size() != 1 ||
      exp.outputs.size() != 1)
    return std::nullopt;
  auto scaled = m.only_reader(out(g, i), "Mul");
  auto total = scaled ? m.other_operand(*scaled, out(g, i)) : std::nullopt;
  auto sum = total ? m.producer(*total, "ReduceSum") : std::nullopt;
  if (!sum || m.only_reader(*total) != scaled) return std::nullopt;
  const std::optional<int64_t> axis = single_axis(g, *sum);
  if (!axis) return std::nullopt;
  const std::string& dy = g.nodes[*sum].inputs[0];
  auto dx = m.only_reader(out(g, *scaled), "Sub");
  if (!dx || g.nodes[*dx].inputs != std::vector<std::string>{dy, out(g, *scaled)})
    return std::nullopt;
  return Fusion{{i, *sum, *scaled, *dx},
                grad_node(g.nodes[*dx], "LogSoftmaxGrad", dy, exp.inputs[0], *axis)};
}

}  // namespace dprun
