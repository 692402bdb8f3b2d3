// The CUDA Range, for float32/64 and int16/32/64 (compute: ops/array/range.cu).
#include "ops/array/range_types.h"

namespace dprun::cuda_ew {
namespace {

// Registered outside impl "elementwise": that table's generic shapes and legacy-broadcast
// variants do not fit this op; ops/array/data_movement_cases.cpp covers it.
DPRUN_REGISTER_KERNEL({.op_type = "Range",
                       .since = 11,
                       .device = DeviceType::CUDA,
                       .dtypes = dtypes(RangeTypes{}),
                       .host_inputs = {0, 1, 2},
                       .factory = cuda_compute("Range")});

}  // namespace
}  // namespace dprun::cuda_ew
