// CUDA unary math: the ops of ops/cpu/unary_math.cpp, with the same functors and opsets.
// Float16 and bfloat16 are stored in 16 bits and computed in float, as on the CPU; integer ops
// cover the integer types the CPU accepts.
#include "ops/cuda/elementwise.cuh"
#include "ops/math/unary_functors.h"

namespace dprun::cuda_ew {
namespace {

template <class Op>
using F = UnaryKernel<Op, FloatAndHalfTypes>;
template <class Op>
using Predicate = UnaryKernel<Op, FloatAndHalfTypes, true>;

DPRUN_CUDA_ELEMENTWISE("Abs", 1, UnaryKernel<math::Abs, NumericAndHalfTypes>);
DPRUN_CUDA_ELEMENTWISE("Neg", 1, UnaryKernel<math::Neg, SignedAndHalfTypes>);
DPRUN_CUDA_ELEMENTWISE("Sign", 9, UnaryKernel<math::Sign, NumericAndHalfTypes>);
DPRUN_CUDA_ELEMENTWISE("Reciprocal", 1, F<math::Reciprocal>);
DPRUN_CUDA_ELEMENTWISE("Sqrt", 1, F<math::Sqrt>);
DPRUN_CUDA_ELEMENTWISE("Exp", 1, F<math::Exp>);
DPRUN_CUDA_ELEMENTWISE("Log", 1, F<math::Log>);
DPRUN_CUDA_ELEMENTWISE("Erf", 9, F<math::Erf>);
DPRUN_CUDA_ELEMENTWISE("Floor", 1, F<math::Floor>);
DPRUN_CUDA_ELEMENTWISE("Ceil", 1, F<math::Ceil>);
DPRUN_CUDA_ELEMENTWISE("Round", 11, F<math::Round>);
DPRUN_CUDA_ELEMENTWISE("Sin", 7, F<math::Sin>);
DPRUN_CUDA_ELEMENTWISE("Cos", 7, F<math::Cos>);
DPRUN_CUDA_ELEMENTWISE("Tan", 7, F<math::Tan>);
DPRUN_CUDA_ELEMENTWISE("Asin", 7, F<math::Asin>);
DPRUN_CUDA_ELEMENTWISE("Acos", 7, F<math::Acos>);
DPRUN_CUDA_ELEMENTWISE("Atan", 7, F<math::Atan>);
DPRUN_CUDA_ELEMENTWISE("Sinh", 9, F<math::Sinh>);
DPRUN_CUDA_ELEMENTWISE("Cosh", 9, F<math::Cosh>);
DPRUN_CUDA_ELEMENTWISE("Asinh", 9, F<math::Asinh>);
DPRUN_CUDA_ELEMENTWISE("Acosh", 9, F<math::Acosh>);
DPRUN_CUDA_ELEMENTWISE("Atanh", 9, F<math::Atanh>);
DPRUN_CUDA_ELEMENTWISE("IsNaN", 9, Predicate<math::IsNaN>);
DPRUN_CUDA_ELEMENTWISE("IsInf", 10, Predicate<math::IsInf>);
DPRUN_CUDA_ELEMENTWISE("Not", 1, UnaryKernel<math::Not, BoolTypes>);
DPRUN_CUDA_ELEMENTWISE("BitwiseNot", 18, UnaryKernel<math::BitwiseNot, IntegralTypes>);

}  // namespace
}  // namespace dprun::cuda_ew
