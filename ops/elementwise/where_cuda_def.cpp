// The CUDA Where(condition, X, Y) with numpy broadcasting over all three inputs (compute:
// ops/elementwise/where.cu). Values move as raw elements of their size, so every fixed-size dtype
// is taken, as on the CPU.
#include "ops/cuda/defs/cuda_types.h"

namespace dprun::cuda_ew {
namespace {

DPRUN_REGISTER_KERNEL({.op_type = "Where",
                       .since = 9,
                       .device = DeviceType::CUDA,
                       .impl = kImpl,
                       .factory = cuda_compute("Where")});

}  // namespace
}  // namespace dprun::cuda_ew
