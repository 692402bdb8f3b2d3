#pragma once
// The element types of the CUDA kernels, shared by their definitions (ops/cuda/defs, every
// build) and their compute (ops/cuda, instantiated for the same lists), so that what a plan
// admits and what a kernel is compiled for cannot drift apart.
#include <cstdint>
#include <vector>

#include "engine/dtype.h"
#include "ops/cuda/defs/cuda_compute.h"

namespace dprun::cuda_ew {

/// The impl name of every CUDA elementwise registration (tests find them by it).
inline constexpr const char* kImpl = "elementwise";

/// The element types a kernel is instantiated for; a definition's dtypes are derived from the
/// same list, so the planner rejects other dtypes before a run.
template <class... Ts>
struct TypeList {};
using FloatTypes = TypeList<float, double>;
using SignedTypes = TypeList<float, double, int8_t, int16_t, int32_t, int64_t>;
using IntegralTypes =
    TypeList<int8_t, int16_t, int32_t, int64_t, uint8_t, uint16_t, uint32_t, uint64_t>;
using NumericTypes = TypeList<float, double, int8_t, int16_t, int32_t, int64_t, uint8_t, uint16_t,
                              uint32_t, uint64_t>;
using BoolTypes = TypeList<bool>;
// The same with float16 and bfloat16, stored in 16 bits and computed in float
// (half_convert.cuh), as the CPU's elementwise kernels take them.
using FloatAndHalfTypes = TypeList<float, double, Float16, BFloat16>;
using SignedAndHalfTypes =
    TypeList<float, double, Float16, BFloat16, int8_t, int16_t, int32_t, int64_t>;
using NumericAndHalfTypes = TypeList<float, double, Float16, BFloat16, int8_t, int16_t, int32_t,
                                     int64_t, uint8_t, uint16_t, uint32_t, uint64_t>;
/// Equal's (ops/elementwise/compare_logic.cu): NumericAndHalfTypes and bool.
using EqualTypes = TypeList<float, double, Float16, BFloat16, int8_t, int16_t, int32_t, int64_t,
                            uint8_t, uint16_t, uint32_t, uint64_t, bool>;

template <class... Ts>
std::vector<DType> dtypes(TypeList<Ts...>) {
  return {dtype_of<Ts>()...};
}

}  // namespace dprun::cuda_ew

/// Defines a CUDA elementwise kernel for an op from its first opset: its compute is the
/// kernel class (over `types`) that ops/cuda supplies with DPRUN_CUDA_ELEMENTWISE under `op`.
/// The CPU registration of the op must cover the same opsets.
#define DPRUN_CUDA_ELEMENTWISE_DEF(op, first_opset, types)            \
  DPRUN_REGISTER_KERNEL({.op_type = op,                               \
                         .since = first_opset,                        \
                         .device = ::dprun::DeviceType::CUDA,         \
                         .dtypes = ::dprun::cuda_ew::dtypes(types{}), \
                         .impl = ::dprun::cuda_ew::kImpl,             \
                         .factory = ::dprun::cuda_compute(op)})
