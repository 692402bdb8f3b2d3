#pragma once
// The dtypes Cast and CastLike convert on CUDA, shared by their definitions
// (ops/elementwise/cast_cuda_def.cpp, which decline other targets) and their compute
// (ops/elementwise/cast.cu, which converts exactly these).
#include <algorithm>
#include <vector>

#include "engine/dtype.h"

namespace dprun {

/// The dtypes converted on the device (sources and targets).
inline const std::vector<DType> kCastTypes = {
    DType::Float32, DType::Float64, DType::Float16, DType::BFloat16, DType::Int8,
    DType::Int16,   DType::Int32,   DType::Int64,   DType::UInt8,    DType::UInt16,
    DType::UInt32,  DType::UInt64,  DType::Bool};

inline bool is_cast_type(DType t) {
  return std::find(kCastTypes.begin(), kCastTypes.end(), t) != kCastTypes.end();
}

}  // namespace dprun
