#pragma once
// Shapes (or at least ranks) of node outputs from the shapes of their inputs, for the gradient
// builder where a graph carries no inferred type for a value: a graph built in code, or a
// value ONNX's shape inference left without one. Gradient rules mostly need ranks (which axes
// to sum, where to unsqueeze), and a rank is known far more often than the dims.
//
// Dims are only ever claimed when certain. A dim that depends on values or on arithmetic over
// attributes (a Conv's spatial size, a Concat's axis) is left unknown (Dim{}), and unknown dims
// never compare equal, so a builder decision that needs them is taken at run time.
#include <functional>
#include <optional>
#include <string>

#include "engine/graph.h"

namespace dprun {

/// Where propagate_shape looks up what it needs about a node's inputs.
struct ShapeSource {
  /// The shape of a value when known (declared, inferred or propagated).
  std::function<std::optional<SymbolicShape>(const std::string&)> shape;
  /// The value of a constant (initializer or Constant node output), when it is one.
  std::function<std::optional<Tensor>(const std::string&)> constant;
};

/// True when two dims are certainly equal: the same known size or the same named symbol.
bool same_dim(const Dim& a, const Dim& b);

/// numpy broadcasting of two shapes, assuming the shapes do broadcast: a size other than 1 on
/// either side is the result's, and two different symbols give an unknown dim. nullopt when
/// two known sizes conflict.
std::optional<SymbolicShape> broadcast_symbolic(const SymbolicShape& a, const SymbolicShape& b);

/// The shape of output `output` of `node` (an ai.onnx op), computed from its inputs' shapes
/// and attributes by the op's registered facts (engine/op_facts.h): its own `shape_rule`
/// (Transpose, MatMul, Reshape, ..., beside its CPU kernel) or its ShapeKind (elementwise and
/// normalization ops, the broadcasting ops, convolutions and pools, Pad/Slice/Resize-like ops
/// by rank only, the reductions). nullopt when the op has no rule or an input's shape is unknown.
std::optional<SymbolicShape> propagate_shape(const Node& node, size_t output,
                                             const ShapeSource& source);

}  // namespace dprun
