#pragma once
// The gradient of a training-mode BatchNormalization over channel axis 1 as
// ops/normalization/batch_norm_grad.cpp writes it in ONNX ops, found in a graph so that a backend
// runs it as one BatchNormTrainingGrad node (the node's contract: engine/rewrites/op_fusion.h). The
// rule recomputes the batch statistics of X and writes, with the sums and means over every axis but
// axis 1 (keepdims),
//   centered = X - ReduceMean(X)
//   inv = Reciprocal(Sqrt(ReduceMean(centered * centered) + epsilon))
//   xhat = centered * inv
//   sum_g = ReduceSum(dY), sum_gx = ReduceSum(dY * xhat)
//   dX = (Unsqueeze(scale) * inv) * (dY - (sum_g + xhat * sum_gx) / Cast(Size(X) / Size(scale)))
// and reshapes sum_gx and sum_g into the gradients of scale and B.
#include <optional>

#include "engine/rewrites/fusion_matcher.h"

namespace dprun {

/// The chain whose first ReduceMean (the mean of X) is node `i`, as
/// BatchNormTrainingGrad(X, dY, scale) with outputs dX, sum_gx and sum_g and the Add's constant
/// as attribute "epsilon", when X is float32 of known rank r >= 2, every reduction runs over axes
/// {0, 2, ..., r - 1} with keepdims, and every value of the chain but those three outputs is read
/// only inside it. The element count may be unknown: the chain divides by it at run time, and so
/// does the kernel. The Unsqueeze of scale and the Size, Div and Cast of the count go with the
/// chain when nothing else reads them. sum_gx and sum_g keep their readers (the Reshapes into the
/// parameters' shapes), which may stand before dX in the graph.
std::optional<Fusion> match_batch_norm_training_grad(const Matcher& m, size_t i);

}  // namespace dprun
