#include "engine/rewrites/batch_norm_grad_fusion.h"

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "engine/rewrites/graph_patterns.h"

namespace dprun {
namespace {

// True when node `k` is a plain ai.onnx `op` node with one output reading exactly `inputs`.
bool reads(const Graph& g, size_t k, const char* op, const std::vector<std::string>& inputs) {
  const Node& n = g.nodes[k];
  return n.domain.empty() && n.op_type == op && n.outputs.size() == 1 && n.inputs == inputs;
}

// True when reduction node `k` reduces over exactly `axes`, keeping them.
bool reduces_over(const Graph& g, size_t k, const std::vector<int64_t>& axes) {
  const Node& n = g.nodes[k];
  if (n.attr_int("keepdims", 1) != 1) return false;
  auto given = axes_operand(g, n);
  return given && *given == axes;
}

const std::string& out(const Graph& g, size_t k) {
  return g.nodes[k].outputs[0];
}

// The two readers of `value`, each a binary Mul, when nothing else reads it: first the one with
// `value` as input `first_at`, then the other.
std::optional<std::pair<size_t, size_t>> two_muls(const Matcher& m, const std::string& value,
                                                  size_t first_at) {
  const Graph& g = m.graph();
  const std::vector<size_t>& r = m.readers(value);
  if (r.size() != 2 || is_graph_result(g, value)) return std::nullopt;
  for (size_t k : r) {
    const Node& n = g.nodes[k];
    if (!n.domain.empty() || n.op_type != "Mul" || n.inputs.size() != 2 || n.outputs.size() != 1)
      return std::nullopt;
  }
  if (g.nodes[r[0]].inputs[first_at] == value) return std::make_pair(r[0], r[1]);
  if (g.nodes[r[1]].inputs[first_at] == value) return std::make_pair(r[1], r[0]);
  return std::nullopt;
}

// True when `value` is declared float32 or is a Cast to float32 (the rule's Cast of a parameter
// of another type, whose type the graph need not declare).
bool is_float32(const Matcher& m, const std::string& value) {
  const Graph& g = m.graph();
  if (auto t = g.type_of(value); t && t->dtype != DType::Undefined)
    return t->dtype == DType::Float32;
  auto cast = m.producer(value, "Cast");
  return cast && g.nodes[*cast].attr_int("to", 0) == static_cast<int64_t>(DType::Float32);
}

// The matched chain: the nodes it hides, and the values the fused node reads and writes.
struct Chain {
  std::vector<size_t> nodes;
  std::string x, dy, scale, centered, inv, xhat, sum_gx, sum_g;
  size_t scaled_inv = 0;  // Unsqueeze(scale) * inv
  size_t dx = 0;
  float epsilon = 0;
};

// centered = X - mean, inv = 1 / sqrt(mean(centered^2) + epsilon) and xhat = centered * inv,
// from the ReduceMean node `i` of X.
bool match_statistics(const Matcher& m, size_t i, const std::vector<int64_t>& axes, Chain& c) {
  const Graph& g = m.graph();
  auto sub = m.only_reader(out(g, i), "Sub");
  if (!sub || !reads(g, *sub, "Sub", {c.x, out(g, i)})) return false;
  c.centered = out(g, *sub);
  auto readers = two_muls(m, c.centered, 1);  // the square (centered at both inputs), xhat
  if (!readers) return false;
  const auto [square, xhat] = *readers;
  auto var = m.only_reader(out(g, square), "ReduceMean");
  if (!reads(g, square, "Mul", {c.centered, c.centered}) || !var || !reduces_over(g, *var, axes))
    return false;
  auto add = m.only_reader(out(g, *var), "Add");
  if (!add || g.nodes[*add].inputs.size() != 2 || g.nodes[*add].inputs[0] != out(g, *var))
    return false;
  auto epsilon = constant_scalar(g, g.nodes[*add].inputs[1]);
  auto sqrt = m.only_reader(out(g, *add), "Sqrt");
  if (!epsilon || *epsilon < 0 || !sqrt) return false;
  auto inv = m.only_reader(out(g, *sqrt), "Reciprocal");
  if (!inv) return false;
  c.epsilon = *epsilon;
  c.inv = out(g, *inv);
  if (!reads(g, xhat, "Mul", {c.centered, c.inv})) return false;
  c.xhat = out(g, xhat);
  c.nodes.insert(c.nodes.end(), {i, *sub, square, *var, *add, *sqrt, *inv, xhat});
  return true;
}

// True when `count` is Cast(Size(X) / Size(scale)) to float32, scale as the rule reads it (before
// a Cast to X's type); the nodes only the chain reads go with it.
bool match_count(const Matcher& m, const std::string& count, Chain& c) {
  const Graph& g = m.graph();
  auto cast = m.producer(count, "Cast");
  if (!cast || g.nodes[*cast].inputs.size() != 1 ||
      g.nodes[*cast].attr_int("to", 0) != static_cast<int64_t>(DType::Float32))
    return false;
  const std::string& ratio = g.nodes[*cast].inputs[0];
  auto div = m.producer(ratio, "Div");
  if (!div || g.nodes[*div].inputs.size() != 2) return false;
  const std::string& numel = g.nodes[*div].inputs[0];
  const std::string& channels = g.nodes[*div].inputs[1];
  auto size_x = m.producer(numel, "Size");
  auto size_scale = m.producer(channels, "Size");
  if (!size_x || !size_scale || g.nodes[*size_x].inputs != std::vector<std::string>{c.x} ||
      g.nodes[*size_scale].inputs.size() != 1)
    return false;
  const std::string& read = g.nodes[*size_scale].inputs[0];
  auto scale_cast = m.producer(c.scale, "Cast");
  if (read != c.scale &&
      !(scale_cast && g.nodes[*scale_cast].inputs == std::vector<std::string>{read}))
    return false;
  // Each goes when its value is read by the chain's node alone.
  if (m.readers(count).size() > 1 || is_graph_result(g, count)) return true;
  c.nodes.push_back(*cast);
  if (m.only_reader(ratio) != cast) return true;
  c.nodes.push_back(*div);
  if (m.only_reader(numel) == div) c.nodes.push_back(*size_x);
  if (m.only_reader(channels) == div) c.nodes.push_back(*size_scale);
  return true;
}

// sum_gx = ReduceSum(dY * xhat), sum_g = ReduceSum(dY) and dX, from xhat's two readers.
bool match_gradient(const Matcher& m, const std::vector<int64_t>& axes, Chain& c) {
  const Graph& g = m.graph();
  auto xhat_readers = two_muls(m, c.xhat, 0);  // xhat * sum_gx first, dY * xhat second
  if (!xhat_readers) return false;
  const auto [times_sum, gx] = *xhat_readers;
  c.dy = g.nodes[gx].inputs[0];
  auto sum_gx = m.only_reader(out(g, gx), "ReduceSum");
  if (c.dy == c.xhat || !sum_gx || !reduces_over(g, *sum_gx, axes)) return false;
  c.sum_gx = out(g, *sum_gx);
  auto add = m.only_reader(out(g, times_sum), "Add");
  if (!reads(g, times_sum, "Mul", {c.xhat, c.sum_gx}) || !add || g.nodes[*add].inputs.size() != 2)
    return false;
  c.sum_g = g.nodes[*add].inputs[0];
  auto sum_g = m.producer(c.sum_g, "ReduceSum");
  if (!reads(g, *add, "Add", {c.sum_g, out(g, times_sum)}) || !sum_g ||
      g.nodes[*sum_g].inputs.empty() || g.nodes[*sum_g].inputs[0] != c.dy ||
      !reduces_over(g, *sum_g, axes))
    return false;
  auto div = m.only_reader(out(g, *add), "Div");
  if (!div || g.nodes[*div].inputs.size() != 2 || g.nodes[*div].inputs[0] != out(g, *add))
    return false;
  auto sub = m.only_reader(out(g, *div), "Sub");
  if (!sub || !reads(g, *sub, "Sub", {c.dy, out(g, *div)}) ||
      !match_count(m, g.nodes[*div].inputs[1], c))
    return false;
  auto dx = m.only_reader(out(g, *sub), "Mul");
  if (!dx || m.only_reader(out(g, c.scaled_inv)) != dx ||
      !reads(g, *dx, "Mul", {out(g, c.scaled_inv), out(g, *sub)}))
    return false;
  c.dx = *dx;
  c.nodes.insert(c.nodes.end(), {gx, *sum_gx, times_sum, *sum_g, *add, *div, *sub, *dx});
  return true;
}

// The scale read by inv's other reader, Unsqueeze(scale) * inv; the Unsqueeze goes with the
// chain when it reads nothing else.
bool match_scale(const Matcher& m, size_t scaled_inv, const std::vector<int64_t>& axes, Chain& c) {
  const Graph& g = m.graph();
  const std::string& unsqueezed = g.nodes[scaled_inv].inputs[0];
  auto unsqueeze = m.producer(unsqueezed, "Unsqueeze");
  if (!unsqueeze || g.nodes[*unsqueeze].inputs.empty() || g.nodes[scaled_inv].inputs[1] != c.inv)
    return false;
  auto given = axes_operand(g, g.nodes[*unsqueeze]);
  c.scale = g.nodes[*unsqueeze].inputs[0];
  if (!given || *given != axes || !is_float32(m, c.scale)) return false;
  c.scaled_inv = scaled_inv;
  c.nodes.push_back(scaled_inv);
  if (m.only_reader(unsqueezed) == scaled_inv) c.nodes.push_back(*unsqueeze);
  return true;
}

}  // namespace

std::optional<Fusion> match_batch_norm_training_grad(const Matcher& m, size_t i) {
  const Graph& g = m.graph();
  const Node& mean = g.nodes[i];
  if (!mean.domain.empty() || mean.op_type != "ReduceMean" || mean.outputs.size() != 1 ||
      mean.inputs.empty())
    return std::nullopt;
  Chain c;
  c.x = mean.inputs[0];
  auto x_type = g.type_of(c.x);
  if (!x_type || x_type->dtype != DType::Float32 || !x_type->shape || x_type->shape->size() < 2)
    return std::nullopt;
  std::vector<int64_t> axes = {0};
  for (size_t a = 2; a < x_type->shape->size(); ++a) axes.push_back(static_cast<int64_t>(a));
  if (!reduces_over(g, i, axes) || !match_statistics(m, i, axes, c)) return std::nullopt;
  auto inv_readers = two_muls(m, c.inv, 1);  // xhat and Unsqueeze(scale) * inv
  if (!inv_readers) return std::nullopt;
  const size_t scaled_inv =
      g.nodes[inv_readers->first].outputs[0] == c.xhat ? inv_readers->second : inv_readers->first;
  if (!match_scale(m, scaled_inv, axes, c) || !match_gradient(m, axes, c)) return std::nullopt;
  Fusion f{c.nodes, fused_node(g.nodes[c.dx], "BatchNormTrainingGrad", {c.x, c.dy, c.scale})};
  f.fused.outputs = {out(g, c.dx), c.sum_gx, c.sum_g};
  f.fused.attributes["epsilon"] = Attribute::of_float(c.epsilon);
  return f;
}

}  // namespace dprun
