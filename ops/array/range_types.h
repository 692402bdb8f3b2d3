#pragma once
// The element types of the CUDA Range, shared by its definition (ops/array/range_cuda_def.cpp) and
// its compute (ops/array/range.cu, instantiated for the same list).
#include <cstdint>

#include "ops/cuda/defs/cuda_types.h"

namespace dprun::cuda_ew {

using RangeTypes = TypeList<float, double, int16_t, int32_t, int64_t>;

}  // namespace dprun::cuda_ew
