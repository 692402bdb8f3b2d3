// The compute of the CUDA comparisons (Equal, Less, LessOrEqual, Greater, GreaterOrEqual) and
// logical And, Or, Xor (defined in ops/elementwise/compare_logic_cuda_def.cpp): broadcasting, bool
// result.
#include "ops/cuda/elementwise.cuh"
#include "ops/math/binary_functors.h"

namespace dprun::cuda_ew {
namespace {

// Comma-free names: a macro argument cannot hold a template-id with two arguments.
using EqualKernel = BinaryKernel<math::Equal, EqualTypes, true>;
template <class Op>
using Compare = BinaryKernel<Op, NumericAndHalfTypes, true>;
template <class Op>
using Logical = BinaryKernel<Op, BoolTypes, true>;

DPRUN_CUDA_ELEMENTWISE("Equal", EqualKernel);
DPRUN_CUDA_ELEMENTWISE("Less", Compare<math::Less>);
DPRUN_CUDA_ELEMENTWISE("LessOrEqual", Compare<math::LessOrEqual>);
DPRUN_CUDA_ELEMENTWISE("Greater", Compare<math::Greater>);
DPRUN_CUDA_ELEMENTWISE("GreaterOrEqual", Compare<math::GreaterOrEqual>);
DPRUN_CUDA_ELEMENTWISE("And", Logical<math::And>);
DPRUN_CUDA_ELEMENTWISE("Or", Logical<math::Or>);
DPRUN_CUDA_ELEMENTWISE("Xor", Logical<math::Xor>);

}  // namespace
}  // namespace dprun::cuda_ew
