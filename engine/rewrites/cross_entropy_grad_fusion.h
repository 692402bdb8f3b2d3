#pragma once
// The scores' gradient of SoftmaxCrossEntropyLoss as its rule writes it when only the loss is
// differentiated (ops/loss/softmax_cross_entropy_grad.cpp, ops/loss/loss_grad.h), found so that
// it runs as one node of the rewrite domain (the backends' op fusion, engine/rewrites/op_fusion.h):
// one pass over the scores instead of a Softmax, a Mul, zeros of the scores' size, their scatter
// and an Add.
#include <optional>

#include "engine/rewrites/fusion_matcher.h"

namespace dprun {

/// The chain whose Softmax (axis 1, ai.onnx opset 13 or newer) is node `i`:
///   spread  = Mul(Softmax(X), scale)
///   scatter = ScatterElements(ConstantOfShape(Shape(X)) of zeros, index, Neg(scale), axis 1)
///   dX      = Add(spread, scatter)
/// (Mul and Add operands in either order; the scatter without a reduction) as
/// SoftmaxCrossEntropyGrad(X, index, scale) of the rewrite domain:
///   dX[n, c, d] = scale[n, 0, d] * (softmax(X)[n, c, d] - (c == index[n, 0, d]))
/// with index and scale shaped [N, 1, d...] (the kernel refuses others; the scatter's updates
/// make them one shape), index in [-C, C) as the scatter's. The softmax, the product, the zeros,
/// the negated scale and the scatter are read only inside the chain; the Shape joins the chain
/// when only the zeros read it.
std::optional<Fusion> match_softmax_cross_entropy_grad(const Matcher& m, size_t i);

}  // namespace dprun
