#pragma once
// The input gradients of Softmax and LogSoftmax along one axis as their gradient rules write
// them (ops/softmax/softmax_grad.cpp, log_softmax_grad.cpp), found so that each runs as one node
// of the rewrite domain (the backends' op fusion, engine/rewrites/op_fusion.h): one pass over
// each row instead of four nodes, two of them a full pass each.
#include <optional>

#include "engine/rewrites/fusion_matcher.h"

namespace dprun {

/// The chain whose ReduceSum is node `i`, Mul(Y, Sub(dY, ReduceSum(Mul(dY, Y), axes [a],
/// keepdims 1))) with the operands of either Mul in either order, as SoftmaxGrad(dY, Y) of the
/// rewrite domain with attribute axis a: Y * (dY - sum over a of dY * Y), dY and Y of one shape
/// (the kernel refuses others). The axes come as the attribute or, from opset 13, as a constant
/// input; a is one axis, negative or not. The product, the sum and the difference are read only
/// inside the chain.
std::optional<Fusion> match_softmax_grad(const Matcher& m, size_t i);

/// The chain whose Exp is node `i`, Sub(dY, Mul(Exp(Y), ReduceSum(dY, axes [a], keepdims 1)))
/// with the Mul's operands in either order, as LogSoftmaxGrad(dY, Y) of the rewrite domain with
/// attribute axis a: dY - exp(Y) * sum over a of dY, dY and Y of one shape. The exponential, the
/// sum and the product are read only inside the chain.
std::optional<Fusion> match_log_softmax_grad(const Matcher& m, size_t i);

}  // namespace dprun
