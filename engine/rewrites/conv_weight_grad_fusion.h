#pragma once
// The weight gradient of a group-1 Conv as ops/grad/conv_grad.cpp writes it in ONNX ops,
//   Transpose(Slice(Conv(Transpose(X), Transpose(dY)), ends = kernel)),
// found in a graph so that a backend runs it as one ConvWeightGrad node on the forward
// convolution's own geometry (the node's contract: engine/rewrites/op_fusion.h).
#include <optional>

#include "engine/rewrites/fusion_matcher.h"

namespace dprun {

/// The chain whose Conv is node `i`, as a ConvWeightGrad(X, dY) node, when:
/// - both Conv operands are Transposes swapping the first two axes (of X, whose element type is
///   known, and of dY); the Conv
///   has no bias, group 1, no auto_pad and no kernel_shape;
/// - the Conv's only reader is a Slice keeping [0, k) of each spatial axis (constant k) and
///   everything of the others, and the Slice's only reader swaps the first two axes back.
/// The fused node takes k as kernel_shape, the Conv's dilations as strides, its strides as
/// dilations, and its pads. No shapes need to be known: the kernel finds at run time whether
/// dY is the output of that convolution of X (as in every gradient), and computes the chain's
/// own result where it is not. The operand Transposes go with the chain when the Conv is their
/// only reader.
std::optional<Fusion> match_conv_weight_grad(const Matcher& m, size_t i);

}  // namespace dprun
