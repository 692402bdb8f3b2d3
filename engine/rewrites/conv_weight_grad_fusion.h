#pragma once
// The weight gradient of a Conv as ops/conv/conv_grad_util.h writes it in ONNX ops,
//   Transpose(Slice(Conv(Transpose(X), Transpose(dY)), ends = kernel)) for group 1, and with
//   X regrouped by Unsqueeze, Reshape, Transpose, Reshape, Squeeze for group G > 1,
// found in a graph so that a backend runs it as one ConvWeightGrad node on the forward
// convolution's own geometry (the node's contract: engine/rewrites/op_fusion.h).
#include <optional>

#include "engine/rewrites/fusion_matcher.h"

namespace dprun {

/// The chain whose Conv is node `i`, as a ConvWeightGrad(X, dY) node, when:
/// - the Conv's operands are dY with its first two axes swapped and X swapped the same way
///   (group 1) or regrouped to [Ci, G*N, in...] exactly as conv_grad_util.h does it (group G, Ci
///   a constant or -1); the Conv has no bias, no auto_pad and no kernel_shape; the element type
///   of X or of dY is known;
/// - the Conv's only reader is a Slice keeping [0, k) of each spatial axis (constant k) and
///   everything of the others, and the Slice's only reader swaps the first two axes back.
/// The fused node takes k as kernel_shape, the Conv's dilations as strides, its strides as
/// dilations, its pads and its group. No shapes need to be known: the kernel finds at run time
/// whether dY is the output of that convolution of X (as in every gradient), and computes the
/// chain's own result where it is not. The operands' nodes go with the chain where the chain alone
/// reads their results.
std::optional<Fusion> match_conv_weight_grad(const Matcher& m, size_t i);

}  // namespace dprun
