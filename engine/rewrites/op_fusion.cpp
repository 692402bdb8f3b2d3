#include "engine/rewrites/op_fusion.h"

#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include "engine/rewrites/attention_fusion.h"
#include "engine/rewrites/batch_norm_grad_fusion.h"
#include "engine/rewrites/conv_weight_grad_fusion.h"
#include "engine/rewrites/cross_entropy_grad_fusion.h"
#include "engine/rewrites/fusion_matcher.h"
#include "engine/rewrites/gelu_fusion.h"
#include "engine/rewrites/graph_patterns.h"
#include "engine/rewrites/kernel_lookup.h"
#include "engine/rewrites/layer_norm_fusion.h"
#include "engine/rewrites/max_pool_grad_fusion.h"
#include "engine/rewrites/pad_sum_fusion.h"
#include "engine/rewrites/rnn_grad_fusion.h"
#include "engine/rewrites/softmax_grad_fusion.h"

namespace dprun {
namespace {

std::optional<Fusion> match_matmul_bias(const Matcher& m, size_t i) {
  const Graph& g = m.graph();
  const Node& matmul = g.nodes[i];
  if (matmul.inputs.size() != 2 || !g.initializers.count(matmul.inputs[1])) return std::nullopt;
  auto b = g.type_of(matmul.inputs[1]);
  if (!b || !b->shape || b->shape->size() != 2 || !(*b->shape)[1].is_known()) return std::nullopt;
  if (b->dtype != DType::Float32 && !is_16bit_float(b->dtype)) return std::nullopt;
  const int64_t n = (*b->shape)[1].value;
  if (!has_type(g, matmul.inputs[1], {(*b->shape)[0].value, n}, b->dtype)) return std::nullopt;
  auto add = m.only_reader(matmul.outputs[0], "Add");
  if (!add) return std::nullopt;
  auto bias = m.other_operand(*add, matmul.outputs[0]);
  if (!bias || !g.initializers.count(*bias) || !has_type(g, *bias, {n}, b->dtype))
    return std::nullopt;
  return Fusion{
      {i, *add},
      fused_node(g.nodes[*add], "MatMulBias", {matmul.inputs[0], matmul.inputs[1], *bias})};
}

/// Relu's gradient, Mul(dY, Cast(Greater(X, 0))) with the mask cast to X's type (float32 or
/// float64), found from its Greater node `i`.
std::optional<Fusion> match_relu_grad(const Matcher& m, size_t i) {
  const Graph& g = m.graph();
  const Node& greater = g.nodes[i];
  if (greater.inputs.size() != 2 || greater.outputs.size() != 1) return std::nullopt;
  auto zero = constant_value(g, greater.inputs[1]);
  // The zero has X's type: the kernel computes in float32 and float64 only.
  if (!zero || zero->numel() != 1 || zero->item_as_double(0) != 0.0 ||
      (zero->dtype() != DType::Float32 && zero->dtype() != DType::Float64))
    return std::nullopt;
  auto cast = m.only_reader(greater.outputs[0], "Cast");
  if (!cast || g.nodes[*cast].attr_int("to", 0) != static_cast<int64_t>(zero->dtype()))
    return std::nullopt;
  const std::string& mask = g.nodes[*cast].outputs[0];
  auto mul = m.only_reader(mask, "Mul");
  auto dy = mul ? m.other_operand(*mul, mask) : std::nullopt;
  if (!dy) return std::nullopt;
  return Fusion{{i, *cast, *mul}, fused_node(g.nodes[*mul], "ReluGrad", {*dy, greater.inputs[0]})};
}

/// MatMulBias or Gemm (from Gemm-7 on: FusedGemm reads Gemm's attributes as they are since)
/// followed by an activation that is its result's only reader: the activation becomes a oneDNN
/// post-op of the product.
std::optional<Fusion> match_activation(const Matcher& m, size_t i) {
  const Graph& g = m.graph();
  const Node& producer = g.nodes[i];
  const bool gemm = producer.domain.empty() && producer.op_type == "Gemm" && g.opset("") >= 7;
  const bool matmul_bias = producer.domain == kRewriteDomain && producer.op_type == "MatMulBias";
  if ((!gemm && !matmul_bias) || producer.outputs.size() != 1 || producer.has_attr("activation"))
    return std::nullopt;
  auto reader = m.only_reader(producer.outputs[0]);
  if (!reader) return std::nullopt;
  const std::string activation = activation_of(g.nodes[*reader]);
  if (activation.empty()) return std::nullopt;
  Node fused = producer;
  fused.name = g.nodes[*reader].name;
  fused.domain = kRewriteDomain;
  if (gemm) fused.op_type = "FusedGemm";
  fused.attributes["activation"] = Attribute::of_string(activation);
  fused.outputs = g.nodes[*reader].outputs;
  return Fusion{{i, *reader}, fused};
}

/// True when Transpose node `t` swaps the last two of its input's dims and keeps the others.
bool swaps_last_two(const Graph& g, const Node& t) {
  std::vector<int64_t> perm;
  if (t.has_attr("perm")) {
    perm = t.attr_ints("perm");
  } else {  // no perm: every dim reversed, the last two swapped for a matrix
    const auto type = g.type_of(t.inputs[0]);
    if (!type || !type->shape || type->shape->size() != 2) return false;
    perm = {1, 0};
  }
  const size_t r = perm.size();
  if (r < 2 || perm[r - 2] != static_cast<int64_t>(r - 1) ||
      perm[r - 1] != static_cast<int64_t>(r - 2))
    return false;
  for (size_t d = 0; d + 2 < r; ++d)
    if (perm[d] != static_cast<int64_t>(d)) return false;
  return true;
}

/// A Transpose of a Transpose: one Transpose of the first one's input by the composed
/// permutation, or an Identity of it where they cancel (a weight transposed for the forward
/// product and back for its gradient's). The first Transpose goes too when nothing else reads
/// it, or is left to its other readers (and so, often, to one product that folds it in); the
/// composed one reads the stored value, which a product can read through strides (the gradients'
/// transposed operands of attention's products).
std::optional<Fusion> match_transpose_of_transpose(const Matcher& m, size_t i) {
  const Graph& g = m.graph();
  const Node& outer = g.nodes[i];
  const auto inner = m.producer(outer.inputs[0], "Transpose");
  if (!inner || !outer.has_attr("perm") || !g.nodes[*inner].has_attr("perm")) return std::nullopt;
  const std::vector<int64_t> first = g.nodes[*inner].attr_ints("perm"),
                             second = outer.attr_ints("perm");
  if (first.size() != second.size()) return std::nullopt;
  std::vector<int64_t> composed;
  bool identity = true;
  for (size_t d = 0; d < second.size(); ++d) {
    const int64_t p = second[d];
    if (p < 0 || p >= static_cast<int64_t>(first.size())) return std::nullopt;
    composed.push_back(first[static_cast<size_t>(p)]);
    identity = identity && composed.back() == static_cast<int64_t>(d);
  }
  Node n;
  n.name = outer.name;
  n.op_type = identity ? "Identity" : "Transpose";
  n.inputs = {g.nodes[*inner].inputs[0]};
  n.outputs = outer.outputs;
  if (!identity) n.attributes["perm"] = Attribute::of_ints(composed);
  if (m.only_reader(outer.inputs[0]) == i) return Fusion{{*inner, i}, n};
  return Fusion{{i}, n};
}

/// The perm of Transpose node `t` when a product can read its result through strides: rank 3 or
/// more, the stored last dim (stride 1) one of the last two, not the identity, not a swap of the
/// last two alone (transA and transB).
std::optional<std::vector<int64_t>> strided_perm(const Node& t) {
  if (!t.has_attr("perm")) return std::nullopt;
  const std::vector<int64_t> perm = t.attr_ints("perm");
  const auto r = static_cast<int64_t>(perm.size());
  if (r < 3 || (perm[r - 1] != r - 1 && perm[r - 2] != r - 1)) return std::nullopt;
  std::vector<bool> seen(perm.size());
  bool identity = true;
  for (int64_t d = 0; d < r; ++d) {
    const int64_t p = perm[static_cast<size_t>(d)];
    if (p < 0 || p >= r || seen[static_cast<size_t>(p)]) return std::nullopt;
    seen[static_cast<size_t>(p)] = true;
    identity = identity && p == d;
  }
  if (identity) return std::nullopt;
  return perm;
}

/// A MatMul reading the result of a Transpose, the Transpose's only reader: FusedMatMul reads the
/// Transpose's input through strides and the copy is never made. A swap of the last two dims
/// (attention's K^T, a weight's W^T, every transposed operand of MatMul's gradient) becomes
/// transA or transB 1; another perm that keeps the stored last dim among the last two
/// (attention's heads split from [B, T, H, D] as [B, H, T, D]) becomes permA or permB.
std::optional<Fusion> match_transposed_operand(const Matcher& m, size_t i) {
  const Graph& g = m.graph();
  const Node& matmul = g.nodes[i];
  if (!matmul.domain.empty() || matmul.op_type != "MatMul" || matmul.inputs.size() != 2 ||
      matmul.inputs[0] == matmul.inputs[1])
    return std::nullopt;
  Fusion fusion{{}, fused_node(matmul, "FusedMatMul", matmul.inputs)};
  for (size_t k = 0; k < 2; ++k) {
    const auto t = m.producer(matmul.inputs[k], "Transpose");
    if (!t || m.only_reader(matmul.inputs[k]) != i) continue;
    if (swaps_last_two(g, g.nodes[*t])) {
      fusion.fused.attributes[k == 0 ? "transA" : "transB"] = Attribute::of_int(1);
    } else if (auto perm = strided_perm(g.nodes[*t])) {
      fusion.fused.attributes[k == 0 ? "permA" : "permB"] = Attribute::of_ints(*perm);
    } else {
      continue;
    }
    fusion.nodes.push_back(*t);
    fusion.fused.inputs[k] = g.nodes[*t].inputs[0];
  }
  if (fusion.nodes.empty()) return std::nullopt;
  fusion.nodes.push_back(i);
  return fusion;
}

/// The chains of several ops: scaled dot-product attention and its marked backward, MatMul with
/// its bias, GELU, layer normalization, and the gradients
/// of GELU (both forms), of a Conv's weight, of a training-mode BatchNormalization, of an
/// overlapping MaxPool, of Relu, of Softmax and LogSoftmax and of the softmax cross-entropy loss.
std::optional<Fusion> match_chain(const Matcher& m, size_t i) {
  const Node& n = m.graph().nodes[i];
  if (!n.domain.empty()) return std::nullopt;
  if (n.op_type == "MatMul") {
    if (auto attention = match_attention(m, i)) return attention;
    return match_matmul_bias(m, i);
  }
  if (n.op_type == "Erf") {
    if (auto gelu = match_gelu(m, i)) return gelu;
    return match_erf_gelu_grad(m, i);
  }
  if (n.op_type == "Tanh") {
    if (auto gelu = match_gelu(m, i)) return gelu;
    return match_tanh_gelu_grad(m, i);
  }
  if (n.op_type == "Conv") return match_conv_weight_grad(m, i);
  if (n.op_type == "ReduceMean") {
    if (auto grad = match_batch_norm_training_grad(m, i)) return grad;
    if (auto grad = match_layer_norm_grad(m, i)) return grad;
    return match_decomposed_layer_norm(m, i);
  }
  if (n.op_type == "Sum") {
    if (auto scatter = match_max_pool_grad_scatter(m, i)) return scatter;
    return match_pad_sum(m, i);
  }
  if (n.op_type == "Greater") return match_relu_grad(m, i);
  if (n.op_type == "ReduceSum") return match_softmax_grad(m, i);
  if (n.op_type == "Exp") return match_log_softmax_grad(m, i);
  if (n.op_type == "Softmax") {
    // The backward region of the attention chain this Softmax is in, found from the Softmax,
    // which comes before every node of it.
    if (auto grad = match_attention_grad(m, i)) return grad;
    return match_softmax_cross_entropy_grad(m, i);
  }
  if (n.op_type == "Transpose") return match_transpose_of_transpose(m, i);
  // The whole backward of an RNN, GRU or LSTM node, found from the forward node, which comes
  // before every node of it: the chains inside it are left to the fused kernel.
  if (n.op_type == "LSTM" || n.op_type == "GRU" || n.op_type == "RNN") return match_rnn_grad(m, i);
  return std::nullopt;
}

}  // namespace

std::shared_ptr<Graph> fuse_ops(const Graph& graph, std::optional<DeviceType> device) {
  FusedNodeFilter runs_on_device;
  if (device)
    runs_on_device = [device = *device](const Graph& g, const Node& fused) {
      return has_accepting_kernel(g, fused, device);
    };
  // Chains first: the activation pass fuses a GELU chain's result into its MatMulBias; the
  // MatMuls left then take their transposed operands.
  return apply_in_turn(graph, {match_chain, match_activation, match_transposed_operand},
                       runs_on_device);
}

}  // namespace dprun
