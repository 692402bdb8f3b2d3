#pragma once
// The gradient of a MaxPool with overlapping windows as ops/pool/max_pool_grad.cpp writes it
// before opset 16, found in a graph so that a backend runs it as one ScatterAdd node (the node's
// contract: engine/rewrites/op_fusion.h). Without ScatterElements' reduction="add", the rule
// splits the output grid into phase groups whose windows never overlap, scatters each group's
// dY into zeros at its argmax positions and sums the groups:
//   Sum over phases p of ScatterElements(Z, Reshape(Slice(I, p, steps), [-1]),
//                                           Reshape(Slice(dY, p, steps), [-1]))
// with Z = ConstantOfShape(size of X) of zeros and I the Indices output of a MaxPool. Every output
// position is in exactly one group, so the sum is dY added into Z at I, in one pass and with no
// tensor of X's size per group.
#include <optional>

#include "engine/rewrites/fusion_matcher.h"

namespace dprun {

/// The chain whose Sum is node `i`, as ScatterAdd(Z, I, dY), when:
/// - every Sum input is a ScatterElements along axis 0 without reduction, read by the Sum alone,
///   into the same Z, a ConstantOfShape of float32 or float64 zeros;
/// - each scatter's indices and updates are Reshapes to [-1] of Slices of I and of one dY with the
///   same constant starts, axes and steps, ends past every axis;
/// - I is output 1 of a MaxPool with storage_order 0, and the Slices' axes and steps are the
///   spatial axes where its windows overlap and their phase counts, ceil(extent / stride): so
///   no two positions of one group share an argmax, and the starts are every phase once.
/// The Slices and Reshapes go with the chain when nothing else reads them.
std::optional<Fusion> match_max_pool_grad_scatter(const Matcher& m, size_t i);

}  // namespace dprun
