// The compute of ReluGrad (rewrite domain) on CUDA (defined in
// ops/elementwise/fused_relu_grad_cuda_def.cpp): dY * (X > 0 ? 1 : 0) for float32 and float64,
// broadcast as Mul's operands (the fused form of ops/elementwise/relu_grad.cpp's Mul(dY,
// Cast(Greater(X, 0))); the node's contract: engine/rewrites/op_fusion.h), by the shared binary
// kernel with the CPU's functor.
#include "ops/cuda/elementwise.cuh"
#include "ops/math/binary_functors.h"

namespace dprun::cuda_ew {
namespace {

// A comma-free name: a macro argument cannot hold a template-id with two arguments.
using ReluGradKernel = BinaryKernel<math::ReluGrad, FloatTypes>;

DPRUN_CUDA_ELEMENTWISE("dprun::ReluGrad", ReluGradKernel);

}  // namespace
}  // namespace dprun::cuda_ew
