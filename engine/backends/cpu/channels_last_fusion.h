#pragma once
// Fusions over the CPU backend's channels-last graph (rewrite_channels_last's output): nodes
// of the rewrite domain that ops/cpu registers. Part of CpuBackend::rewrite_for_kernels, after the
// layout rewrite.
#include <memory>

#include "engine/graph.h"

namespace dprun {

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
