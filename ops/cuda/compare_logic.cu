// CUDA comparisons (Equal, Less, LessOrEqual, Greater, GreaterOrEqual) over the CPU's numeric
// types (Equal also bool) and logical And, Or, Xor: broadcasting, bool result.
#include "ops/cuda/elementwise.cuh"
#include "ops/math/binary_functors.h"

namespace dprun::cuda_ew {
namespace {

template <class Op, class Types>
using C = BinaryKernel<Op, Types, true>;
using EqualTypes = TypeList<float, double, Float16, BFloat16, int8_t, int16_t, int32_t, int64_t,
                            uint8_t, uint16_t, uint32_t, uint64_t, bool>;

DPRUN_CUDA_ELEMENTWISE("Equal", 1, C<math::Equal, EqualTypes>);
DPRUN_CUDA_ELEMENTWISE("Less", 1, C<math::Less, NumericAndHalfTypes>);
DPRUN_CUDA_ELEMENTWISE("LessOrEqual", 12, C<math::LessOrEqual, NumericAndHalfTypes>);
DPRUN_CUDA_ELEMENTWISE("Greater", 1, C<math::Greater, NumericAndHalfTypes>);
DPRUN_CUDA_ELEMENTWISE("GreaterOrEqual", 12, C<math::GreaterOrEqual, NumericAndHalfTypes>);
DPRUN_CUDA_ELEMENTWISE("And", 1, C<math::And, BoolTypes>);
DPRUN_CUDA_ELEMENTWISE("Or", 1, C<math::Or, BoolTypes>);
DPRUN_CUDA_ELEMENTWISE("Xor", 1, C<math::Xor, BoolTypes>);

}  // namespace
}  // namespace dprun::cuda_ew
