#pragma once
// The element types and limits of the CUDA poolings, shared by their definitions
// (ops/pool/pool_cuda_def.cpp, ops/pool/max_pool_indices_cuda_def.cpp) and their compute
// (ops/pool/pool_cuda.cpp, ops/pool/max_pool_indices.cu), so that what a plan admits and what a
// kernel computes cannot drift apart.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "engine/dtype.h"
#include "ops/cuda/defs/cuda_types.h"

namespace dprun::cuda_pool {

/// The dtypes of every cuDNN pooling (MaxPool without Indices, AveragePool, GlobalMaxPool,
/// GlobalAveragePool).
inline const std::vector<DType> kPoolTypes = {DType::Float32, DType::Float16, DType::BFloat16};

/// The dtypes of MaxPool with Indices: those of the CPU reference MaxPool, all compared
/// exactly.
using MaxPoolTypes = cuda_ew::TypeList<float, double, Float16, BFloat16, int8_t, uint8_t>;

/// The most spatial dims MaxPool with Indices takes.
inline constexpr size_t kMaxSpatial = 3;

}  // namespace dprun::cuda_pool
