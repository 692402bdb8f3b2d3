// The CUDA PRelu over float32/64 and the signed integers (the CPU's Types::Signed without the
// 16-bit floats), with its legacy per-channel slope (compute: ops/elementwise/prelu.cu).
#include "ops/cuda/defs/cuda_types.h"

namespace dprun::cuda_ew {
namespace {

// Defined outside impl "elementwise": that table's generic shapes and legacy-broadcast
// variants do not fit this op; ops/elementwise/elementwise_binary_cases.cpp covers it
// (add_prelu_cases).
DPRUN_REGISTER_KERNEL({.op_type = "PRelu",
                       .since = 1,
                       .device = DeviceType::CUDA,
                       .dtypes = dtypes(SignedTypes{}),
                       .factory = cuda_compute("PRelu")});

}  // namespace
}  // namespace dprun::cuda_ew
