#pragma once
// What an op's own shape rule (OpFacts::shape_rule, registered beside the op's CPU kernel)
// works with: the node, the output asked for, its inputs' shapes and constant values, and the
// small helpers the rules share. Rules claim a dim only when certain (shape_propagation.h).
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "engine/autograd/shape_propagation.h"

namespace dprun {

/// One question to a shape rule: the shape of output `output` of `node`.
struct ShapeQuery {
  const Node& node;
  size_t output;
  const ShapeSource& source;

  /// The shape of input i; nullopt when absent or unknown.
  std::optional<SymbolicShape> input(size_t i) const;
  /// The value of input i when it is a constant; nullopt otherwise.
  std::optional<Tensor> constant(size_t i) const;
  /// Integer values of a 1-D constant input i, or of the attribute `attr` when the node has it
  /// (the older opsets' form).
  std::optional<std::vector<int64_t>> ints_from(size_t i, const std::string& attr) const;
  /// The length of a 1-D input i (a shape or axes list) when its own shape is known.
  std::optional<int64_t> length_of(size_t i) const;
};

/// `axis` (negative counts from the end) as an index into a shape of `rank`; nullopt when out
/// of range.
std::optional<int64_t> axis_in(int64_t axis, int64_t rank);
/// `rank` unknown dims.
SymbolicShape unknown_dims(size_t rank);
/// The product of dims [begin, end); unknown when any of them is.
Dim product(const SymbolicShape& s, size_t begin, size_t end);
/// Known dims.
SymbolicShape from_dims(const Shape& dims);
/// The dims a 1-D constant holds (a shape given as a tensor).
SymbolicShape dims_in(const Tensor& values);

}  // namespace dprun
