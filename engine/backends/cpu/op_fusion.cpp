#include "engine/backends/cpu/op_fusion.h"

#include <cmath>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "engine/backends/cpu/graph_patterns.h"
#include "engine/backends/cpu/layout_rewrite.h"

namespace dprun {
namespace {

/// A chain of nodes to replace by one: `nodes` go away, `fused` takes the place of the chain's
/// last node (after every producer of the chain's inputs, before every reader of its result),
/// preceded by `before` where a rewrite needs more nodes than one.
struct Fusion {
  std::vector<size_t> nodes;
  Node fused;
  std::vector<Node> before = {};
};

/// Pattern matching over one graph: who produces and who reads each value.
class Matcher {
 public:
  explicit Matcher(const Graph& graph) : graph_(graph), readers_(value_readers(graph)) {
    for (size_t i = 0; i < graph.nodes.size(); ++i)
      for (const auto& out : graph.nodes[i].outputs)
        if (!out.empty()) producer_[out] = i;
  }

  const Graph& graph() const { return graph_; }

  /// The node producing `value` if it is a plain ai.onnx `op` node with one output.
  std::optional<size_t> producer(const std::string& value, const char* op) const {
    auto it = producer_.find(value);
    if (it == producer_.end() || !is(it->second, op)) return std::nullopt;
    return it->second;
  }

  /// The node producing `value`, whatever its op.
  std::optional<size_t> producer(const std::string& value) const {
    auto it = producer_.find(value);
    if (it == producer_.end()) return std::nullopt;
    return it->second;
  }

  /// The single reader of `value` if `value` is read by nothing else and is no graph result.
  std::optional<size_t> only_reader(const std::string& value) const {
    auto it = readers_.find(value);
    if (it == readers_.end() || it->second.size() != 1 || is_graph_result(graph_, value))
      return std::nullopt;
    return it->second[0];
  }

  /// only_reader(value) if that reader is a plain ai.onnx `op` node with one output.
  std::optional<size_t> only_reader(const std::string& value, const char* op) const {
    auto reader = only_reader(value);
    if (!reader || !is(*reader, op)) return std::nullopt;
    return reader;
  }

  /// The operand of binary node `i` other than `value`, when `value` is exactly one of its two.
  std::optional<std::string> other_operand(size_t i, const std::string& value) const {
    const Node& n = graph_.nodes[i];
    if (n.inputs.size() != 2 || n.inputs[0] == n.inputs[1]) return std::nullopt;
    if (n.inputs[0] == value) return n.inputs[1];
    if (n.inputs[1] == value) return n.inputs[0];
    return std::nullopt;
  }

  /// `base`, or `base` with a "#k" suffix, whichever first names no value of the graph.
  std::string fresh_name(const std::string& base) const {
    std::string name = base;
    for (int k = 1; producer_.count(name) || readers_.count(name) ||
                    is_initializer_or_input(name) || is_graph_result(graph_, name);
         ++k)
      name = base + "#" + std::to_string(k);
    return name;
  }

  /// True when `value` is a float32 scalar constant within 1e-5 (relative) of `want`.
  bool is_constant_near(const std::string& value, double want) const {
    auto v = constant_scalar(graph_, value);
    return v && std::abs(*v - want) <= 1e-5 * std::abs(want);
  }

 private:
  bool is_initializer_or_input(const std::string& name) const {
    if (graph_.initializers.count(name)) return true;
    for (const auto& in : graph_.inputs)
      if (in.name == name) return true;
    return false;
  }

  bool is(size_t i, const char* op) const {
    const Node& n = graph_.nodes[i];
    return n.domain.empty() && n.op_type == op && n.outputs.size() == 1;
  }

  const Graph& graph_;
  std::map<std::string, std::vector<size_t>> readers_;
  std::map<std::string, size_t> producer_;
};

/// True when `value`'s declared type is float32 with the given known dims.
bool has_type(const Graph& graph, const std::string& value, const std::vector<int64_t>& dims) {
  auto t = graph.type_of(value);
  if (!t || t->dtype != DType::Float32 || !t->shape || t->shape->size() != dims.size())
    return false;
  for (size_t i = 0; i < dims.size(); ++i)
    if (!(*t->shape)[i].is_known() || (*t->shape)[i].value != dims[i]) return false;
  return true;
}

Node fused_node(const Node& last, const char* op, std::vector<std::string> inputs) {
  Node n;
  n.name = last.name;
  n.op_type = op;
  n.domain = kLayoutDomain;
  n.inputs = std::move(inputs);
  n.outputs = last.outputs;
  return n;
}

/// MatMul(A, B) -> Add(., bias) with B a 2-D float32 initializer [K, N] and bias one of [N].
std::optional<Fusion> match_matmul_bias(const Matcher& m, size_t i) {
  const Graph& g = m.graph();
  const Node& matmul = g.nodes[i];
  if (matmul.inputs.size() != 2 || !g.initializers.count(matmul.inputs[1])) return std::nullopt;
  auto b = g.type_of(matmul.inputs[1]);
  if (!b || !b->shape || b->shape->size() != 2 || !(*b->shape)[1].is_known()) return std::nullopt;
  const int64_t n = (*b->shape)[1].value;
  if (!has_type(g, matmul.inputs[1], {(*b->shape)[0].value, n})) return std::nullopt;
  auto add = m.only_reader(matmul.outputs[0], "Add");
  if (!add) return std::nullopt;
  auto bias = m.other_operand(*add, matmul.outputs[0]);
  if (!bias || !g.initializers.count(*bias) || !has_type(g, *bias, {n})) return std::nullopt;
  return Fusion{
      {i, *add},
      fused_node(g.nodes[*add], "MatMulBias", {matmul.inputs[0], matmul.inputs[1], *bias})};
}

/// The erf form of GELU, found from its Erf node `i`.
std::optional<Fusion> match_gelu(const Matcher& m, size_t i) {
  const Graph& g = m.graph();
  const std::string& scaled = g.nodes[i].inputs[0];
  if (g.nodes[i].inputs.size() != 1 || !m.only_reader(scaled, "Erf")) return std::nullopt;
  // x / sqrt(2), or x * (1 / sqrt(2)) with the operands in either order.
  std::optional<std::string> x;
  size_t scale = 0;
  if (auto div = m.producer(scaled, "Div")) {
    const Node& d = g.nodes[*div];
    if (d.inputs.size() == 2 && m.is_constant_near(d.inputs[1], std::sqrt(2.0))) x = d.inputs[0];
    scale = *div;
  } else if (auto mul = m.producer(scaled, "Mul")) {
    for (size_t k = 0; k < 2 && !x; ++k) {
      auto other = m.other_operand(*mul, g.nodes[*mul].inputs[k]);
      if (other && m.is_constant_near(g.nodes[*mul].inputs[k], std::sqrt(0.5))) x = other;
    }
    scale = *mul;
  }
  if (!x) return std::nullopt;
  // 1 + erf(.)
  auto plus_one = m.only_reader(g.nodes[i].outputs[0], "Add");
  if (!plus_one) return std::nullopt;
  auto one = m.other_operand(*plus_one, g.nodes[i].outputs[0]);
  if (!one || !m.is_constant_near(*one, 1.0)) return std::nullopt;
  const std::string& bracket = g.nodes[*plus_one].outputs[0];
  auto times = m.only_reader(bracket, "Mul");
  if (!times) return std::nullopt;
  auto factor = m.other_operand(*times, bracket);
  if (!factor) return std::nullopt;
  if (*factor == *x) {  // (x * bracket) * 0.5
    auto half_mul = m.only_reader(g.nodes[*times].outputs[0], "Mul");
    if (!half_mul) return std::nullopt;
    auto half = m.other_operand(*half_mul, g.nodes[*times].outputs[0]);
    if (!half || !m.is_constant_near(*half, 0.5)) return std::nullopt;
    return Fusion{{scale, i, *plus_one, *times, *half_mul},
                  fused_node(g.nodes[*half_mul], "Gelu", {*x})};
  }
  // (x * 0.5) * bracket: the halving Mul reads x, and only `times` reads its result.
  auto half_mul = m.producer(*factor, "Mul");
  if (!half_mul || !m.only_reader(*factor, "Mul")) return std::nullopt;
  auto half = m.other_operand(*half_mul, *x);
  if (!half || !m.is_constant_near(*half, 0.5)) return std::nullopt;
  return Fusion{{scale, *half_mul, i, *plus_one, *times},
                fused_node(g.nodes[*times], "Gelu", {*x})};
}

/// The activation attribute for a node that applies `n` to its input, or empty: Relu, Sigmoid,
/// and Gelu in its erf form (this pass's Gelu, or ai.onnx Gelu-20 without approximation).
std::string activation_of(const Node& n) {
  if (n.inputs.size() != 1 || n.outputs.size() != 1) return "";
  if (n.domain.empty() && (n.op_type == "Relu" || n.op_type == "Sigmoid")) return n.op_type;
  if (n.op_type == "Gelu" && (n.domain == kLayoutDomain || n.domain.empty()) &&
      n.attr_string("approximate", "none") == "none")
    return "Gelu";
  return "";
}

/// MatMulBias or Gemm (from Gemm-7 on: FusedGemm reads Gemm's attributes as they are since)
/// followed by an activation that is its result's only reader: the activation becomes a oneDNN
/// post-op of the product.
std::optional<Fusion> match_activation(const Matcher& m, size_t i) {
  const Graph& g = m.graph();
  const Node& producer = g.nodes[i];
  const bool gemm = producer.domain.empty() && producer.op_type == "Gemm" && g.opset("") >= 7;
  const bool matmul_bias = producer.domain == kLayoutDomain && producer.op_type == "MatMulBias";
  if ((!gemm && !matmul_bias) || producer.outputs.size() != 1 || producer.has_attr("activation"))
    return std::nullopt;
  auto reader = m.only_reader(producer.outputs[0]);
  if (!reader) return std::nullopt;
  const std::string activation = activation_of(g.nodes[*reader]);
  if (activation.empty()) return std::nullopt;
  Node fused = producer;
  fused.name = g.nodes[*reader].name;
  fused.domain = kLayoutDomain;
  if (gemm) fused.op_type = "FusedGemm";
  fused.attributes["activation"] = Attribute::of_string(activation);
  fused.outputs = g.nodes[*reader].outputs;
  return Fusion{{i, *reader}, fused};
}

/// A pattern: the fusion starting at node i, if any.
using Pattern = std::optional<Fusion> (*)(const Matcher&, size_t);

/// Every fusion `pattern` finds, none sharing a node.
std::vector<Fusion> find_fusions(const Graph& graph, Pattern pattern) {
  const Matcher matcher(graph);
  std::vector<Fusion> fusions;
  std::set<size_t> taken;
  for (size_t i = 0; i < graph.nodes.size(); ++i) {
    std::optional<Fusion> f = pattern(matcher, i);
    if (!f) continue;
    bool free = true;
    for (size_t k : f->nodes) free = free && !taken.count(k);
    if (!free) continue;
    taken.insert(f->nodes.begin(), f->nodes.end());
    fusions.push_back(std::move(*f));
  }
  return fusions;
}

/// The chains of several ops: MatMul with its bias, and GELU.
std::optional<Fusion> match_chain(const Matcher& m, size_t i) {
  const Node& n = m.graph().nodes[i];
  if (!n.domain.empty()) return std::nullopt;
  if (n.op_type == "MatMul") return match_matmul_bias(m, i);
  if (n.op_type == "Erf") return match_gelu(m, i);
  return std::nullopt;
}

/// `graph` with every fusion `pattern` finds applied, or nullptr when it finds none.
std::shared_ptr<Graph> apply_fusions(const Graph& graph, Pattern pattern) {
  const std::vector<Fusion> fusions = find_fusions(graph, pattern);
  if (fusions.empty()) return nullptr;
  std::map<size_t, const Fusion*> replaced_by;  // a chain's last node -> its fusion
  std::set<size_t> removed;
  for (const Fusion& f : fusions) {
    size_t last = 0;
    for (size_t k : f.nodes) last = std::max(last, k);
    replaced_by[last] = &f;
    removed.insert(f.nodes.begin(), f.nodes.end());
  }
  auto out = std::make_shared<Graph>(graph);
  out->nodes.clear();
  out->opset_imports[kLayoutDomain] = 1;
  for (size_t i = 0; i < graph.nodes.size(); ++i) {
    if (auto it = replaced_by.find(i); it != replaced_by.end()) {
      out->nodes.insert(out->nodes.end(), it->second->before.begin(), it->second->before.end());
      out->nodes.push_back(it->second->fused);
    } else if (!removed.count(i))
      out->nodes.push_back(graph.nodes[i]);
  }
  return out;
}

/// The only reader of `value` when it is a node of the "dprun" domain's `op` with one output
/// that reads `value` as its input 0 (X) and as no other input.
std::optional<size_t> x_reader(const Matcher& m, const std::string& value, const char* op) {
  auto reader = m.only_reader(value);
  if (!reader) return std::nullopt;
  const Node& r = m.graph().nodes[*reader];
  if (r.domain != kLayoutDomain || r.op_type != op || r.outputs.size() != 1 || r.inputs.empty() ||
      r.inputs[0] != value)
    return std::nullopt;
  for (size_t k = 1; k < r.inputs.size(); ++k)
    if (r.inputs[k] == value) return std::nullopt;
  return reader;
}

/// The reader of Concat node `i` when the Concat joins NHWC values along channels (axis 3 or -1)
/// and `reader_op` (a channels-last op of the "dprun" domain, reading the concatenation as its
/// input 0 and nowhere else) is the only reader of its result.
std::optional<size_t> channel_concat_reader(const Matcher& m, size_t i, const char* reader_op) {
  const Node& concat = m.graph().nodes[i];
  if (!concat.domain.empty() || concat.op_type != "Concat" || concat.outputs.size() != 1 ||
      concat.inputs.empty())
    return std::nullopt;
  const int64_t axis = concat.attr_int("axis", 1);
  if (axis != 3 && axis != -1) return std::nullopt;
  return x_reader(m, concat.outputs[0], reader_op);
}

/// `graph` with each pattern's fusions applied in turn, each pass over the previous one's
/// result; nullptr when none matches.
std::shared_ptr<Graph> apply_in_turn(const Graph& graph, std::initializer_list<Pattern> patterns) {
  std::shared_ptr<Graph> result;
  for (Pattern pattern : patterns)
    if (std::shared_ptr<Graph> next = apply_fusions(result ? *result : graph, pattern))
      result = next;
  return result;
}

/// Concat along NHWC channels -> BatchNormalizationNHWC(X = the concatenation, its only reader).
std::optional<Fusion> match_concat_norm(const Matcher& m, size_t i) {
  auto reader = channel_concat_reader(m, i, "BatchNormalizationNHWC");
  if (!reader || m.graph().nodes[*reader].inputs.size() != 5) return std::nullopt;
  Node fused = m.graph().nodes[*reader];
  fused.op_type = "ConcatBatchNormalizationNHWC";
  fused.inputs.erase(fused.inputs.begin());
  const Node& concat = m.graph().nodes[i];
  fused.inputs.insert(fused.inputs.end(), concat.inputs.begin(), concat.inputs.end());
  return Fusion{{i, *reader}, fused};
}

/// Concat of NHWC parts along channels -> ConvNHWC of one group (the concatenation its only
/// reader, as X): ConcatConvNHWC(W, B, parts...), one convolution per part summed into the
/// output. Splitting writes and reads the output once more per part after the first, instead of
/// writing and reading the concatenation once, so it is done only where that moves fewer bytes:
/// (parts - 1) * output channels <= input channels. A standalone oneDNN program, batch 8, one
/// thread, two parts: 64+64 -> 16 channels at 55 x 55 took 1.24 ms split against 2.34 ms
/// concatenated; 256+256 -> 1000 at 13 x 13 8.1 against 7.3 ms.
std::optional<Fusion> match_concat_conv(const Matcher& m, size_t i) {
  auto reader = channel_concat_reader(m, i, "ConvNHWC");
  const Node& concat = m.graph().nodes[i];
  if (!reader || concat.inputs.size() < 2) return std::nullopt;
  const Node& conv = m.graph().nodes[*reader];
  if (conv.inputs.size() < 2 || conv.inputs.size() > 3 || conv.attr_int("group", 1) != 1)
    return std::nullopt;
  auto w = m.graph().type_of(conv.inputs[1]);
  if (!w || !w->shape || w->shape->size() != 4 || !(*w->shape)[0].is_known() ||
      !(*w->shape)[1].is_known())
    return std::nullopt;
  const int64_t parts = static_cast<int64_t>(concat.inputs.size());
  if ((parts - 1) * (*w->shape)[0].value > (*w->shape)[1].value) return std::nullopt;
  Node fused = conv;
  fused.op_type = "ConcatConvNHWC";
  fused.inputs = {conv.inputs[1], conv.inputs.size() > 2 ? conv.inputs[2] : ""};
  fused.inputs.insert(fused.inputs.end(), concat.inputs.begin(), concat.inputs.end());
  return Fusion{{i, *reader}, fused};
}

/// The readers of a channel Concat that become one node with it.
std::optional<Fusion> match_concat_reader(const Matcher& m, size_t i) {
  if (auto f = match_concat_norm(m, i)) return f;
  return match_concat_conv(m, i);
}

/// Concat of NHWC parts along channels -> MaxPoolNHWC or AveragePoolNHWC (its only reader): the
/// pool, which works on each channel alone, moves before the Concat, one pool per part with the
/// same attributes, and the Concat joins the pooled parts. The results are the same bits; the
/// Concat copies the pooled (smaller) parts, and may then join a convolution
/// (match_concat_conv), as in SqueezeNet, where pools follow Fire modules' Concats.
std::optional<Fusion> match_pool_through_concat(const Matcher& m, size_t i) {
  std::optional<size_t> reader;
  for (const char* pool : {"MaxPoolNHWC", "AveragePoolNHWC"})
    if (!reader) reader = channel_concat_reader(m, i, pool);
  if (!reader || m.graph().nodes[*reader].inputs.size() != 1) return std::nullopt;
  const Node& pool = m.graph().nodes[*reader];
  Fusion f{{i, *reader}, m.graph().nodes[i]};
  f.fused.outputs = pool.outputs;
  for (size_t k = 0; k < f.fused.inputs.size(); ++k) {
    Node part = pool;
    part.name = pool.name + "/part" + std::to_string(k);
    part.inputs = {f.fused.inputs[k]};
    part.outputs = {m.fresh_name(pool.outputs[0] + "/part" + std::to_string(k))};
    f.fused.inputs[k] = part.outputs[0];
    f.before.push_back(std::move(part));
  }
  return f;
}

/// ConvNHWC without an activation -> Add(its result, Z), its only reader -> optionally an
/// activation (Relu, Sigmoid, erf-form Gelu) that is the Add's only reader: ConvAddNHWC(X, W,
/// B or "", Z) with the ConvNHWC's attributes and the activation, oneDNN's sum post-op adding
/// the convolution to Z (residual blocks: ResNet's Conv, Add, Relu; MobileNetV2's Conv, Add).
std::optional<Fusion> match_conv_add(const Matcher& m, size_t i) {
  const Graph& g = m.graph();
  const Node& conv = g.nodes[i];
  if (conv.domain != kLayoutDomain || conv.op_type != "ConvNHWC" || conv.outputs.size() != 1 ||
      conv.has_attr("activation") || conv.inputs.size() < 2 || conv.inputs.size() > 3)
    return std::nullopt;
  auto add = m.only_reader(conv.outputs[0], "Add");
  if (!add) return std::nullopt;
  auto z = m.other_operand(*add, conv.outputs[0]);
  if (!z) return std::nullopt;
  Node fused = conv;
  fused.op_type = "ConvAddNHWC";
  fused.inputs.resize(3);  // B may be omitted: ""
  fused.inputs.push_back(*z);
  Fusion f{{i, *add}, fused};
  const Node* last = &g.nodes[*add];
  if (auto reader = m.only_reader(last->outputs[0])) {
    const std::string activation = activation_of(g.nodes[*reader]);
    if (!activation.empty()) {
      f.fused.attributes["activation"] = Attribute::of_string(activation);
      f.nodes.push_back(*reader);
      last = &g.nodes[*reader];
    }
  }
  f.fused.name = last->name;
  f.fused.outputs = last->outputs;
  return f;
}

/// The ConvNHWC or ConvAddNHWC that reads `value` as its X, nowhere else, and is its only
/// reader.
std::optional<size_t> chained_conv(const Matcher& m, const std::string& value) {
  const auto inputs = [&](size_t node) { return m.graph().nodes[node].inputs.size(); };
  if (auto conv = x_reader(m, value, "ConvNHWC"); conv && inputs(*conv) >= 2 && inputs(*conv) <= 3)
    return conv;
  if (auto conv_add = x_reader(m, value, "ConvAddNHWC"); conv_add && inputs(*conv_add) == 4)
    return conv_add;
  return std::nullopt;
}

/// ConvNHWC -> ConvNHWC -> ... (-> ConvAddNHWC), each value between two of them read only by
/// the next as its X: ConvChainNHWC(X, W0, B0 or "", W1, B1 or "", ..., [Z]) with "steps", "sum"
/// (the last is a ConvAddNHWC, Z its addend) and each step's attributes prefixed "<k>:". The
/// kernel runs the chain a few images at a time, the values between steps staying in cache
/// (MobileNetV2's expansion, depthwise and projection convolutions; ResNet's pairs).
std::optional<Fusion> match_conv_chain(const Matcher& m, size_t i) {
  const Graph& g = m.graph();
  const Node& head = g.nodes[i];
  if (head.domain != kLayoutDomain || head.op_type != "ConvNHWC" || head.outputs.size() != 1 ||
      head.inputs.size() < 2 || head.inputs.size() > 3)
    return std::nullopt;
  // Only from the chain's first convolution.
  if (auto before = m.producer(head.inputs[0]);
      before && g.nodes[*before].domain == kLayoutDomain &&
      g.nodes[*before].op_type == "ConvNHWC" && chained_conv(m, head.inputs[0]) == i)
    return std::nullopt;
  std::vector<size_t> steps = {i};
  while (g.nodes[steps.back()].op_type == "ConvNHWC") {
    auto next = chained_conv(m, g.nodes[steps.back()].outputs[0]);
    if (!next) break;
    steps.push_back(*next);
  }
  if (steps.size() < 2) return std::nullopt;
  const Node& last = g.nodes[steps.back()];
  Node fused;
  fused.name = last.name;
  fused.op_type = "ConvChainNHWC";
  fused.domain = kLayoutDomain;
  fused.inputs = {head.inputs[0]};
  fused.outputs = last.outputs;
  fused.attributes["steps"] = Attribute::of_int(static_cast<int64_t>(steps.size()));
  const bool sum = last.op_type == "ConvAddNHWC";
  fused.attributes["sum"] = Attribute::of_int(sum ? 1 : 0);
  for (size_t k = 0; k < steps.size(); ++k) {
    const Node& step = g.nodes[steps[k]];
    fused.inputs.push_back(step.inputs[1]);
    fused.inputs.push_back(step.inputs.size() > 2 ? step.inputs[2] : "");
    for (const auto& [key, value] : step.attributes)
      fused.attributes[std::to_string(k) + ":" + key] = value;
  }
  if (sum) fused.inputs.push_back(last.inputs[3]);
  return Fusion{steps, fused};
}

/// Transpose(X, perm [0, 2, 3, 1]) -> ConvNHWC of one group whose weights' shape [M, C, kh, kw]
/// is known, with C <= 4 and kh * kw <= 9 -> MaxPoolNHWC, each the only reader of the value
/// before it, as its X: NchwConvMaxPoolNHWC(X, W, B or "") with the ConvNHWC's attributes and
/// the MaxPoolNHWC's prefixed "pool:" (a network's first convolution and pool, as in SqueezeNet;
/// the kernel convolves the NCHW input into oneDNN's blocked layout, which for so few input
/// channels beats the NHWC convolution; for ResNet's 7x7 window it does not).
std::optional<Fusion> match_nchw_conv_pool(const Matcher& m, size_t i) {
  const Graph& g = m.graph();
  const Node& transpose = g.nodes[i];
  if (!transpose.domain.empty() || transpose.op_type != "Transpose" ||
      transpose.inputs.size() != 1 || transpose.outputs.size() != 1 ||
      transpose.attr_ints("perm", {}) != std::vector<int64_t>{0, 2, 3, 1})
    return std::nullopt;
  auto conv = x_reader(m, transpose.outputs[0], "ConvNHWC");
  if (!conv) return std::nullopt;
  const Node& c = g.nodes[*conv];
  if (c.inputs.size() < 2 || c.inputs.size() > 3 || c.attr_int("group", 1) != 1)
    return std::nullopt;
  auto w = g.type_of(c.inputs[1]);
  if (!w || !w->shape || w->shape->size() != 4) return std::nullopt;
  for (const auto& d : *w->shape)
    if (!d.is_known()) return std::nullopt;
  const SymbolicShape& dims = *w->shape;
  if (dims[1].value > 4 || dims[2].value * dims[3].value > 9) return std::nullopt;
  auto pool = x_reader(m, c.outputs[0], "MaxPoolNHWC");
  if (!pool) return std::nullopt;
  const Node& p = g.nodes[*pool];
  Node fused = c;
  fused.name = p.name;
  fused.op_type = "NchwConvMaxPoolNHWC";
  fused.inputs = {transpose.inputs[0], c.inputs[1], c.inputs.size() > 2 ? c.inputs[2] : ""};
  fused.outputs = p.outputs;
  for (const auto& [key, value] : p.attributes) fused.attributes["pool:" + key] = value;
  return Fusion{{i, *conv, *pool}, fused};
}

}  // namespace

std::shared_ptr<Graph> fuse_channels_last_ops(const Graph& graph) {
  // Pools first: a Concat they move past may then join its new reader. Chains last: a
  // ConvAddNHWC may end one.
  return apply_in_turn(graph, {match_pool_through_concat, match_concat_reader, match_conv_add,
                               match_conv_chain, match_nchw_conv_pool});
}

std::shared_ptr<Graph> fuse_ops(const Graph& graph) {
  // Chains first: the activation pass fuses a GELU chain's result into its MatMulBias.
  return apply_in_turn(graph, {match_chain, match_activation});
}

}  // namespace dprun
