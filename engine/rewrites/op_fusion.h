#pragma once
// Op fusion: chains of ONNX nodes that run faster as one kernel, rewritten into nodes of the
// rewrite domain (engine/rewrites/rewrite_domain.h). Independent of layout: the CPU backend
// applies it before its layout rewrite, the CUDA backend alone, each naming its device so that
// only nodes it has kernels for are made (the rewrite domain's kernels, each in its op family's
// folder: ops/linalg/ for MatMulBias, FusedGemm and FusedMatMul, ops/elementwise/ for Gelu and
// ReluGrad, ops/attention/ for Attention and AttentionGrad, ops/conv/, ops/normalization/,
// ops/pool/, ops/array/ and ops/recurrent/ for the fused gradients; `dprun ops` lists them).
#include <memory>
#include <optional>

#include "engine/device.h"
#include "engine/graph.h"

namespace dprun {

/// Returns a rewritten copy of `graph` with these chains fused, or nullptr when none matches:
/// - MatMul(A, B) followed by Add(., bias), B a 2-D initializer [K, N] and bias a 1-D
///   initializer [N] of B's type (float32, float16 or bfloat16; either Add operand order),
///   becomes MatMulBias(A, B, bias): the bias is
///   added while the product is written (a oneDNN post-op, a cuBLASLt epilogue), saving a pass
///   over the output;
/// - the erf form of GELU as exporters write it for opsets before Gelu-20,
///   Mul(Mul(x, Add(Erf(Div(x, sqrt 2)), 1)), 0.5) (Div by sqrt 2 or Mul by 1/sqrt 2, operands in
///   either order, the 0.5 applied first or last), becomes Gelu(x): one pass instead of five;
///   its tanh form, 0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3))), becomes
///   Gelu(x, approximate "tanh"): one pass instead of nine (engine/rewrites/gelu_fusion.h);
///   the erf form's gradient as Gelu's rule writes it becomes GeluGrad(dY, x)
///   (engine/rewrites/gelu_fusion.h): one pass instead of eleven; the tanh form's becomes
///   GeluGrad(dY, x, approximate "tanh"): one pass instead of eighteen;
/// - layer normalization as exporters write it before LayerNormalization-17 (ReduceMean, Sub,
///   Pow, ReduceMean, Add, Sqrt, Div, Mul by Scale, Add of B; engine/rewrites/layer_norm_fusion.h)
///   becomes LayerNormalization(X, Scale[, B]): one pass over each row instead of nine; the
///   input gradient as LayerNormalization's rule writes it becomes LayerNormGrad(X, dY, Scale)
///   (and xhat for the scale's gradient): three passes over each row instead of fifteen nodes;
/// - the weight gradient of a Conv as ops/conv/conv_grad_util.h emits it (a Conv of swapped or
///   regrouped operands, cropped and transposed back; engine/rewrites/conv_weight_grad_fusion.h)
///   becomes ConvWeightGrad(X, dY) with the forward Conv's kernel_shape, strides, dilations, pads
///   and group G (default 1): dW[m, c, k] = sum over n and o of dY[n, m, o] * X[n, g * C / G + c,
///   o * stride + k * dilation - pad_begin] (X zero outside, g = m / (M / G)), shape [M, C / G,
///   kernel...]. It runs as a backward-weights convolution: no Transposes, and no sums over the
///   rows the stride leaves unused, which the Conv form computes and crops away;
/// - the gradient of a float32 training-mode BatchNormalization over axis 1 as
///   ops/normalization/batch_norm_grad.cpp emits it (engine/rewrites/batch_norm_grad_fusion.h)
///   becomes BatchNormTrainingGrad(X, dY, scale) with attribute epsilon and three outputs: dX, and
///   sum(dY * xhat) and sum(dY) over every axis but 1, shaped [1, C, 1, ...]; xhat is X
///   normalized by its batch statistics. Three passes over X and dY instead of about twelve, and
///   no tensor of X's size but dX written;
/// - the gradient of a MaxPool with overlapping windows before opset 16, a Sum of phase-group
///   scatters into zeros (engine/rewrites/max_pool_grad_fusion.h), becomes ScatterAdd(Z, I, dY):
///   Z with each dY[i] added at flat position I[i] (I the MaxPool's Indices, read flat like dY),
///   one pass instead of a scatter into a copy of Z per group and their Sum;
/// - the gradient of Slices that cut a value into pieces along one axis, a Sum of zero Pads each
///   putting a piece back (engine/rewrites/pad_sum_fusion.h), becomes PadSum(pieces) with the
///   axis and each piece's pads: the pieces written where the padding puts them, their
///   concatenation in one pass when they tile the axis, instead of a pass per Pad and the Sum's;
/// - Relu's gradient as ops/elementwise/relu_grad.cpp emits it, Mul(dY, Cast(Greater(X, 0)))
///   with the mask cast to X's type (Mul's operands in either order), becomes ReluGrad(dY, X) =
///   dY * (X > 0 ? 1 : 0), broadcast as the Mul: one pass instead of three;
/// - the input gradients of Softmax and LogSoftmax as their rules write them become
///   SoftmaxGrad(dY, Y) and LogSoftmaxGrad(dY, Y) with the axis
///   (engine/rewrites/softmax_grad_fusion.h): one pass over each row instead of four nodes;
/// - the scores' gradient of SoftmaxCrossEntropyLoss as its rule writes it (a Softmax recomputed,
///   scaled, and the labels' share scattered into zeros) becomes SoftmaxCrossEntropyGrad(X,
///   index, scale) (engine/rewrites/cross_entropy_grad_fusion.h): one pass over the scores
///   instead of five nodes;
/// - the whole backward pass of a float32 LSTM, GRU or RNN node as ops/recurrent/rnn_grad.cpp emits
///   and marks it (engine/rewrites/rnn_grad_fusion.h) becomes LSTMGrad, GRUGrad or RNNGrad
///   (ops/recurrent/rnn_grad_onednn.cpp): oneDNN's training forward and backward primitives instead
///   of hundreds of per-step nodes;
/// - scaled dot-product attention, MatMul(q, k^T) [scaled by a scalar constant, on q or on the
///   scores] [masked by Add(S, M) or Where(C, fill, S)] -> Softmax over the last axis ->
///   MatMul(P, v) [-> Transpose], q, k^T and v each the Transpose of a stored value or that value
///   (engine/rewrites/attention_fusion.h), becomes Attention(Q, K, V[, mask]): per chunk of heads
///   the scores are computed, scaled, masked and turned into probabilities while in cache, and
///   multiplied by v, Q, K and V read and the result written through the Transposes' strides;
///   the scores and their scaled and masked copies are never stored, nor the heads' transposed
///   copies, and P is an output only when the backward reads it. Attention's backward, as its
///   rule (ops/attention/attention_grad.cpp) emits and marks it, becomes AttentionGrad(Q, K, V,
///   P, dY[, C]): two products, the score gradient per row in cache, two more, writing dQ, dK and
///   dV in Q's, K's and V's layouts, instead of about twenty nodes and their Transposes;
/// - then a MatMulBias, or a Gemm (opset 7 on), whose result's only reader is a Relu, Sigmoid or
///   erf-form Gelu takes that activation as attribute "activation" (Gemm becomes FusedGemm with
///   Gemm's attributes): oneDNN applies it as a post-op while writing the product;
/// - a Transpose of a Transpose becomes one Transpose of the first one's input by the composed
///   permutation, or an Identity of it where they cancel (a weight transposed for its product
///   and back for its gradient's), the first one kept only for its other readers;
/// - then a MatMul whose operand is a Transpose read by nothing else becomes FusedMatMul(A, B),
///   oneDNN reading the Transpose's input through strides, so the copy is never made: transA or
///   transB 1 (both when both are) for a swap of the last two dims that keeps the others
///   (attention's K^T, a linear layer's W^T, MatMul's gradients); permA or permB, the perm, for
///   another permutation of rank 3 or more that keeps the stored last dim among the last two
///   (attention's heads split from [B, T, H, D] as [B, H, T, D], and the gradients' operands).
/// Every value a fused chain hides must be read only inside the chain and not be a graph output;
/// the chain's last value keeps its name, so the rewritten graph has the same inputs, outputs and
/// initializers. Subgraphs are not touched. With a `device`, only chains whose fused node has a
/// kernel there for its inputs' types, which takes its attributes, are fused (a float32-only fused
/// kernel leaves a 16-bit chain as it is, each node on its own 16-bit kernel).
std::shared_ptr<Graph> fuse_ops(const Graph& graph,
                                std::optional<DeviceType> device = std::nullopt);

}  // namespace dprun
