// The compute of the CUDA unary math (defined in ops/elementwise/unary_math_cuda_def.cpp): the ops
// of ops/elementwise/unary_math.cpp, with the same functors. Float16 and bfloat16 are stored in 16
// bits and computed in float, as on the CPU; integer ops cover the integer types the CPU accepts.
#include "ops/cuda/elementwise.cuh"
#include "ops/math/unary_functors.h"

namespace dprun::cuda_ew {
namespace {

template <class Op>
using F = UnaryKernel<Op, FloatAndHalfTypes>;
template <class Op>
using Predicate = UnaryKernel<Op, FloatAndHalfTypes, true>;
// Comma-free names: a macro argument cannot hold a template-id with two arguments.
template <class Op>
using Numeric = UnaryKernel<Op, NumericAndHalfTypes>;
using NegKernel = UnaryKernel<math::Neg, SignedAndHalfTypes>;
using NotKernel = UnaryKernel<math::Not, BoolTypes>;
using BitwiseNotKernel = UnaryKernel<math::BitwiseNot, IntegralTypes>;

DPRUN_CUDA_ELEMENTWISE("Abs", Numeric<math::Abs>);
DPRUN_CUDA_ELEMENTWISE("Neg", NegKernel);
DPRUN_CUDA_ELEMENTWISE("Sign", Numeric<math::Sign>);
DPRUN_CUDA_ELEMENTWISE("Reciprocal", F<math::Reciprocal>);
DPRUN_CUDA_ELEMENTWISE("Sqrt", F<math::Sqrt>);
DPRUN_CUDA_ELEMENTWISE("Exp", F<math::Exp>);
DPRUN_CUDA_ELEMENTWISE("Log", F<math::Log>);
DPRUN_CUDA_ELEMENTWISE("Erf", F<math::Erf>);
DPRUN_CUDA_ELEMENTWISE("Floor", F<math::Floor>);
DPRUN_CUDA_ELEMENTWISE("Ceil", F<math::Ceil>);
DPRUN_CUDA_ELEMENTWISE("Round", F<math::Round>);
DPRUN_CUDA_ELEMENTWISE("Sin", F<math::Sin>);
DPRUN_CUDA_ELEMENTWISE("Cos", F<math::Cos>);
DPRUN_CUDA_ELEMENTWISE("Tan", F<math::Tan>);
DPRUN_CUDA_ELEMENTWISE("Asin", F<math::Asin>);
DPRUN_CUDA_ELEMENTWISE("Acos", F<math::Acos>);
DPRUN_CUDA_ELEMENTWISE("Atan", F<math::Atan>);
DPRUN_CUDA_ELEMENTWISE("Sinh", F<math::Sinh>);
DPRUN_CUDA_ELEMENTWISE("Cosh", F<math::Cosh>);
DPRUN_CUDA_ELEMENTWISE("Asinh", F<math::Asinh>);
DPRUN_CUDA_ELEMENTWISE("Acosh", F<math::Acosh>);
DPRUN_CUDA_ELEMENTWISE("Atanh", F<math::Atanh>);
DPRUN_CUDA_ELEMENTWISE("IsNaN", Predicate<math::IsNaN>);
DPRUN_CUDA_ELEMENTWISE("IsInf", Predicate<math::IsInf>);
DPRUN_CUDA_ELEMENTWISE("Not", NotKernel);
DPRUN_CUDA_ELEMENTWISE("BitwiseNot", BitwiseNotKernel);

}  // namespace
}  // namespace dprun::cuda_ew
