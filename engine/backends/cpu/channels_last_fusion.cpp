#include "engine/backends/cpu/channels_last_fusion.h"

#include <optional>
#include <string>
#include <vector>

#include "engine/rewrites/fusion_matcher.h"

namespace dprun {
namespace {

/// The only reader of `value` when it is a node of the "dprun" domain's `op` with one output
/// that reads `value` as its input 0 (X) and as no other input.
std::optional<size_t> x_reader(const Matcher& m, const std::string& value, const char* op) {
  auto reader = m.only_reader(value);
  if (!reader) return std::nullopt;
  const Node& r = m.graph().nodes[*reader];
  if (r.domain != kRewriteDomain || r.op_type != op || r.outputs.size() != 1 || r.inputs.empty() ||
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
  if (conv.domain != kRewriteDomain || conv.op_type != "ConvNHWC" || conv.outputs.size() != 1 ||
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
  if (head.domain != kRewriteDomain || head.op_type != "ConvNHWC" || head.outputs.size() != 1 ||
      head.inputs.size() < 2 || head.inputs.size() > 3)
    return std::nullopt;
  // Only from the chain's first convolution.
  if (auto before = m.producer(head.inputs[0]);
      before && g.nodes[*before].domain == kRewriteDomain &&
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
  fused.domain = kRewriteDomain;
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

}  // namespace dprun
