// ReluGrad (rewrite domain): dY * (X > 0 ? 1 : 0), the fused form of
// ops/elementwise/relu_grad.cpp's Mul(dY, Cast(Greater(X, 0))) in one pass instead of three (the
// node's contract: engine/rewrites/op_fusion.h). The shared binary kernel broadcasts dY and X as
// Mul's operands and may write over a dying input; the functor is the CUDA kernel's
// (math::ReluGrad).
#include "engine/rewrites/rewrite_domain.h"
#include "ops/cpu/elementwise.h"
#include "ops/math/binary_functors.h"

namespace dprun::ew {
namespace {

DPRUN_REGISTER_KERNEL({.domain = kRewriteDomain,
                       .op_type = "ReluGrad",
                       .dtypes = {DType::Float32, DType::Float64},
                       .factory = make_kernel<BinaryKernel<math::ReluGrad, Types::Float>>});

}  // namespace
}  // namespace dprun::ew
