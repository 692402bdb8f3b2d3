#pragma once
// Layer normalization as exporters write it for opsets before LayerNormalization-17 (PyTorch's
// exporter, Keras converters):
//   mean = ReduceMean(X, axes, keepdims 1)
//   d    = Sub(X, mean)
//   var  = ReduceMean(Pow(d, 2) or Mul(d, d), axes, keepdims 1)
//   Y    = Mul(Div(d, Sqrt(Add(var, epsilon))), Scale)  [then Add B]
// with `axes` the last k axes of X. Found so that it runs as one LayerNormalization node: the
// backends fuse it (engine/rewrites/op_fusion.h) and the gradient builder differentiates it as one
// (engine/autograd/gradient_builder.h), which keeps the backward pass to LayerNormalization's rule
// instead of the rules of nine ops and their broadcasting sums.
#include <optional>

#include "engine/rewrites/fusion_matcher.h"

namespace dprun {

/// The chain whose first ReduceMean is node `i`, as an ai.onnx LayerNormalization node
/// (X, Scale[, B]) with attributes axis (-k, the first normalized axis counted from the end) and
/// epsilon (the Add's one-element floating constant, as float32), named and placed as the chain's
/// last node, whose output it keeps. Accepted when: the reductions run over the same contiguous
/// trailing axes (given as attribute or, from opset 18, as a constant input; negative or, when X's
/// rank is declared, non-negative), keeping them; the square is Pow by the constant 2 (of any
/// floating type) or d times d; the Add's constant is >= 0 (either operand order); Scale and B are
/// values of a floating type whose declared rank is at most k (so they broadcast only within the
/// normalized axes, as LayerNormalization's do); every value inside the chain is read only inside
/// it and is no graph result. Operands of Mul and Add may come in either order. A chain without the
/// Mul by Scale (a layer norm without elementwise affine) is left as it is: LayerNormalization
/// needs a Scale.
std::optional<Fusion> match_decomposed_layer_norm(const Matcher& m, size_t i);

/// The input gradient of LayerNormalization over the last k axes as
/// ops/normalization/layer_norm_grad.cpp writes it, found from its first ReduceMean (of X),
/// node `i`:
///   centered = X - ReduceMean(X);  inv = Reciprocal(Sqrt(ReduceMean(centered * centered) + eps))
///   xhat = centered * inv;  dxhat = dY * Scale
///   dX = inv * ((dxhat - ReduceMean(dxhat)) - xhat * ReduceMean(dxhat * xhat))
/// every reduction over the same trailing axes with keepdims, as LayerNormGrad(X, dY, Scale) of
/// the rewrite domain with attributes axis (-k) and epsilon and outputs dX and, when something
/// outside the chain reads it (the scale's gradient), xhat. Every other value of the chain is
/// read only inside it. X is float32.
std::optional<Fusion> match_layer_norm_grad(const Matcher& m, size_t i);

}  // namespace dprun
