// ReluGrad (rewrite domain) on CUDA: dY * (X > 0 ? 1 : 0) for float32 and float64, broadcast as
// Mul's operands (the fused form of ops/grad/relu_grad.cpp's Mul(dY, Cast(Greater(X, 0))); the
// node's contract: engine/rewrites/op_fusion.h), by the shared binary kernel with the CPU's
// functor.
#include "engine/rewrites/rewrite_domain.h"
#include "ops/cuda/elementwise.cuh"
#include "ops/math/binary_functors.h"

namespace dprun::cuda_ew {
namespace {

DPRUN_REGISTER_KERNEL({.domain = kRewriteDomain,
                       .op_type = "ReluGrad",
                       .device = DeviceType::CUDA,
                       .dtypes = dtypes(FloatTypes{}),
                       .factory = make_kernel<BinaryKernel<math::ReluGrad, FloatTypes>>});

}  // namespace
}  // namespace dprun::cuda_ew
