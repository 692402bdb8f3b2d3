#pragma once
// Scaled dot-product attention as exporters write it (nn.MultiheadAttention, GPT blocks):
//   S = MatMul(q, kt)              q = [Transpose(Q, perm_q)] [Div or Mul by a scalar constant]
//                                  kt = [Transpose(K, perm_k)], [..., d, Lk]
//   [Mul or Div by a scalar constant]
//   [Add(S, M)  or  Where(C, fill, S)  or  Where(C, S, fill), fill a scalar constant]
//   P = Softmax(S) over the last axis
//   O = MatMul(P, v)               v = [Transpose(V, perm_v)], [..., Lk, dv]
//   [Transpose(O, perm_o)]
// found so that it runs as one node: the CPU backend fuses it into Attention (below), whose
// kernel (ops/attention/attention_onednn.cpp) reads Q, K and V through the Transposes' strides,
// never writes the scores S, their scaled or masked copies, and writes O where the Transpose
// after it would put it; the gradient builder differentiates it as one node
// (engine/autograd/gradient_builder.h), whose rule (ops/attention/attention_grad.cpp) emits plain
// ONNX between the marks of engine/rewrites/marked_region.h, which the CPU backend runs as one
// AttentionGrad node (match_attention_grad).
//
// Attention (rewrite domain), inputs Q, K, V and the mask (M or C, when there is one); outputs O
// (the chain's result) and, when something outside the chain reads it, P (the Softmax's result,
// which the backward reads). Attributes: scale (float, the product of the chain's scalars: a
// Div by c counts 1 / c), perm_q, perm_k, perm_v and perm_o (the Transposes' perms, each absent
// where there is no Transpose), mask ("add" or "where", absent for none), and for "where" fill
// (float) and fill_where (1: fill where C is true, Where(C, fill, S); 0: where it is false).
//
// What it saves: the forward no longer writes the scores, their scaled and masked copies (each
// [batch, heads, Lq, Lk] floats: 4 MiB per layer for a GPT of 4 heads over 128 tokens at batch
// 16, 1 MiB for a ViT of 4 heads over 65 tokens), nor the heads' copies of q, k, v and the result
// (2 MiB each there, 1 MiB for the ViT); the backward no longer writes dP, dS and their
// transposed products. What the backward keeps is what the chain's own rules kept: three
// operands and P. Rows are worked on while in cache, each chunk's scores at most 256 KiB.
//
// AttentionGrad (rewrite domain), inputs Q, K, V, P, dOut (the gradient of the chain's result)
// and C for a "where" mask; outputs dQ, dK and dV shaped like Q, K and V (each empty where not
// wanted); the forward node's attributes. With dO = dOut read through perm_o's inverse:
//   dv = P^T dO,  dP = dO v^T,  dS = scale * P * (dP - rowsum(P * dP)), 0 where the mask fills,
//   dq = dS kt^T,  dkt = q^T dS
// each written through its operand's perm into the layout Q, K or V has.
#include <optional>

#include "engine/rewrites/fusion_matcher.h"

namespace dprun {

/// The first two entries of an attention gradient region's table, then the flags "gradient of Q,
/// K, V given".
inline constexpr int64_t kAttentionGradMagic = 0x41545447524144;  // "ATTGRAD"
inline constexpr int64_t kAttentionGradVersion = 1;
inline constexpr size_t kAttentionGradTableSize = 5;

/// The chain whose first MatMul (q times kt) is node `i`, as an Attention node named and placed
/// as the chain's last node (listed last in the fusion's nodes). Accepted when: the MatMuls,
/// the Softmax and every value between them have rank r >= 3 where declared, every perm has r
/// entries and keeps the stored last dim among the last two (perm_o keeps it last), so that
/// each operand is read through strides with one dim contiguous; Softmax's axis is the last
/// (-1 or r - 1; before opset 13 the same, its 2-D coercion then changing nothing); the scalars
/// are one-element constants, or computed from such by Mul, Div, Reciprocal, Pow, Sqrt and Cast
/// (GPT's 1 / sqrt(d)); the mask's fill is such a scalar; every value inside the chain but P is
/// read only inside it and is no graph result; q, kt and v do not have declared batch dims that
/// differ (a K or V broadcast over the heads). Shapes are checked by the kernel, which refuses
/// a mask that would broadcast the scores to a larger shape.
std::optional<Fusion> match_attention(const Matcher& m, size_t i);

/// The Softmax inside the chain of a match_attention fusion: its result is P.
const Node& attention_softmax(const Graph& g, const Fusion& attention);

/// The marked backward region of the attention chain whose Softmax is node `i`, as one
/// AttentionGrad node named <chain's last node's name>/grad; the region is the one the rule of
/// the chain's Attention node emitted (the scope its name), closed (marked_region.h), reading
/// the chain's inputs, P and the one received gradient. Q's element type is float32.
std::optional<Fusion> match_attention_grad(const Matcher& m, size_t i);

}  // namespace dprun
