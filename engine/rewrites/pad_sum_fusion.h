#pragma once
// The gradient of slices that cut a value into pieces (q, k, v = qkv[..., :d], qkv[..., d:2d],
// qkv[..., 2d:] in attention), found in a graph so that a backend writes it once: each Slice's
// gradient pads its piece back with zeros (ops/array/slice_grad.cpp) and the gradient builder
// sums them, a pass over the whole value per piece and another to add them. PadSum
// (ops/array/pad_sum.cpp) writes each piece where its padding puts it: when the pieces tile the
// axis, their concatenation in one pass.
#include <optional>

#include "engine/rewrites/fusion_matcher.h"

namespace dprun {

/// The Sum node `i` as PadSum(pieces) with attributes axis, begins and ends (each piece's
/// leading and trailing pads along the axis), when every Sum input is a zero Pad (mode constant,
/// value absent or 0, pads constant and non-negative, no axes input) read by the Sum alone,
/// all padding along one axis and no other. The pads' Constants go with the chain when nothing
/// else reads them. The pieces' shapes need not be known: PadSum checks them when it runs.
std::optional<Fusion> match_pad_sum(const Matcher& m, size_t i);

}  // namespace dprun
