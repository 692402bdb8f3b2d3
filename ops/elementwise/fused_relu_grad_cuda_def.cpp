// The CUDA ReluGrad (rewrite domain; the node's contract: engine/rewrites/op_fusion.h):
// dY * (X > 0 ? 1 : 0) for float32 and float64 (compute: ops/elementwise/fused_relu_grad.cu).
#include "engine/rewrites/rewrite_domain.h"
#include "ops/cuda/defs/cuda_types.h"

namespace dprun::cuda_ew {
namespace {

DPRUN_REGISTER_KERNEL({.domain = kRewriteDomain,
                       .op_type = "ReluGrad",
                       .device = DeviceType::CUDA,
                       .dtypes = dtypes(FloatTypes{}),
                       .factory = cuda_compute("dprun::ReluGrad")});

}  // namespace
}  // namespace dprun::cuda_ew
