#pragma once
// Op fusion: chains of ONNX nodes that the CPU runs faster as one kernel, rewritten into nodes of
// the "dprun" domain (the layout rewrite's domain, engine/backends/cpu/layout_rewrite.h) that
// ops/cpu registers. Part of the CPU backend's graph rewrite (CpuBackend::rewrite_graph), before
// the layout rewrite.
#include <memory>

#include "engine/graph.h"

namespace dprun {

/// Returns a rewritten copy of `graph` with these chains fused, or nullptr when none matches:
/// - MatMul(A, B) followed by Add(., bias), B a 2-D initializer [K, N] and bias a 1-D
///   initializer [N] (either Add operand order), becomes MatMulBias(A, B, bias): oneDNN adds the
///   bias while it writes the product, saving a pass over the output;
/// - the erf form of GELU as exporters write it for opsets before Gelu-20,
///   Mul(Mul(x, Add(Erf(Div(x, sqrt 2)), 1)), 0.5) (Div by sqrt 2 or Mul by 1/sqrt 2, operands in
///   either order, the 0.5 applied first or last), becomes Gelu(x): one pass instead of five;
/// - then a MatMulBias, or a Gemm (opset 7 on), whose result's only reader is a Relu, Sigmoid or
///   erf-form Gelu takes that activation as attribute "activation" (Gemm becomes FusedGemm with
///   Gemm's attributes): oneDNN applies it as a post-op while writing the product.
/// Every value a fused chain hides must be read only inside the chain and not be a graph output;
/// the chain's last value keeps its name, so the rewritten graph has the same inputs, outputs and
/// initializers. Subgraphs are not touched.
std::shared_ptr<Graph> fuse_ops(const Graph& graph);

/// Fusions over the channels-last graph (rewrite_channels_last's output), after the layout
/// rewrite; returns nullptr when none matches. Each starts from a Concat along the channels of
/// NHWC values (axis 3 or -1) whose only reader reads it as its X:
/// - a MaxPoolNHWC or AveragePoolNHWC reader moves before the Concat: one pool per part, with
///   the pool's attributes, and the Concat joins the pooled parts under the pool's output name
///   (the same bits; the Concat copies smaller parts and may then match what follows);
/// - with a BatchNormalizationNHWC reader, the pair becomes ConcatBatchNormalizationNHWC(scale,
///   B, mean, var, parts...) with the BatchNormalizationNHWC's attributes (its activation
///   included): the parts are normalized while they are copied, saving a pass over the
///   concatenation (DenseNet's Concat, BatchNormalization, Relu before every dense layer);
/// - with a ConvNHWC reader of one group, whose weights' shape is known, the pair becomes
///   ConcatConvNHWC(W, B or "", parts...) with the ConvNHWC's attributes, one convolution per
///   part summed into the output, the concatenation never written; only where that moves fewer
///   bytes, (parts - 1) * output channels <= input channels (SqueezeNet's Fire modules).
/// Then a ConvNHWC without an activation whose result's only reader is an Add becomes
/// ConvAddNHWC(X, W, B or "", Z), Z the Add's other operand, with the ConvNHWC's attributes
/// and, when the Add's only reader is a Relu, Sigmoid or erf-form Gelu, that activation: the
/// convolution is added to Z as it is written (residual blocks). Then convolutions in a chain,
/// each value between two read only by the next as its X, become ConvChainNHWC, run a few
/// images at a time. Last, Transpose(X, perm [0, 2, 3, 1]) -> ConvNHWC of one group, weights
/// [M, C <= 4, kh, kw] with kh * kw <= 9 -> MaxPoolNHWC, each the only reader of the value before
/// it, becomes NchwConvMaxPoolNHWC(X, W, B or "") with the ConvNHWC's attributes and the
/// MaxPoolNHWC's prefixed "pool:": the NCHW input is convolved into oneDNN's blocked layout and
/// pooled there (a network's first layers, as in SqueezeNet).
std::shared_ptr<Graph> fuse_channels_last_ops(const Graph& graph);

}  // namespace dprun
