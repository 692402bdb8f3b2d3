// The CUDA Clip over the CPU's numeric types: min/max attributes before opset 11, optional
// scalar inputs from 11 (compute: ops/elementwise/clip.cu).
#include "ops/cuda/defs/cuda_types.h"

namespace dprun::cuda_ew {
namespace {

// Defined outside impl "elementwise": that table's generic shapes and legacy-broadcast
// variants do not fit this op; ops/elementwise/elementwise_unary_cases.cpp covers it
// (add_clip_cases).
DPRUN_REGISTER_KERNEL({.op_type = "Clip",
                       .since = 1,
                       .device = DeviceType::CUDA,
                       .dtypes = dtypes(NumericTypes{}),
                       .factory = cuda_compute("Clip")});

}  // namespace
}  // namespace dprun::cuda_ew
