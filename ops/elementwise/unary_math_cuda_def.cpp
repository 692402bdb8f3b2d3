// The CUDA unary math: the ops of ops/elementwise/unary_math.cpp, with the same opsets (compute:
// ops/elementwise/unary_math.cu). Integer ops cover the integer types the CPU accepts.
#include "ops/cuda/defs/cuda_types.h"

namespace dprun::cuda_ew {
namespace {

DPRUN_CUDA_ELEMENTWISE_DEF("Abs", 1, NumericAndHalfTypes);
DPRUN_CUDA_ELEMENTWISE_DEF("Neg", 1, SignedAndHalfTypes);
DPRUN_CUDA_ELEMENTWISE_DEF("Sign", 9, NumericAndHalfTypes);
DPRUN_CUDA_ELEMENTWISE_DEF("Reciprocal", 1, FloatAndHalfTypes);
DPRUN_CUDA_ELEMENTWISE_DEF("Sqrt", 1, FloatAndHalfTypes);
DPRUN_CUDA_ELEMENTWISE_DEF("Exp", 1, FloatAndHalfTypes);
DPRUN_CUDA_ELEMENTWISE_DEF("Log", 1, FloatAndHalfTypes);
DPRUN_CUDA_ELEMENTWISE_DEF("Erf", 9, FloatAndHalfTypes);
DPRUN_CUDA_ELEMENTWISE_DEF("Floor", 1, FloatAndHalfTypes);
DPRUN_CUDA_ELEMENTWISE_DEF("Ceil", 1, FloatAndHalfTypes);
DPRUN_CUDA_ELEMENTWISE_DEF("Round", 11, FloatAndHalfTypes);
DPRUN_CUDA_ELEMENTWISE_DEF("Sin", 7, FloatAndHalfTypes);
DPRUN_CUDA_ELEMENTWISE_DEF("Cos", 7, FloatAndHalfTypes);
DPRUN_CUDA_ELEMENTWISE_DEF("Tan", 7, FloatAndHalfTypes);
DPRUN_CUDA_ELEMENTWISE_DEF("Asin", 7, FloatAndHalfTypes);
DPRUN_CUDA_ELEMENTWISE_DEF("Acos", 7, FloatAndHalfTypes);
DPRUN_CUDA_ELEMENTWISE_DEF("Atan", 7, FloatAndHalfTypes);
DPRUN_CUDA_ELEMENTWISE_DEF("Sinh", 9, FloatAndHalfTypes);
DPRUN_CUDA_ELEMENTWISE_DEF("Cosh", 9, FloatAndHalfTypes);
DPRUN_CUDA_ELEMENTWISE_DEF("Asinh", 9, FloatAndHalfTypes);
DPRUN_CUDA_ELEMENTWISE_DEF("Acosh", 9, FloatAndHalfTypes);
DPRUN_CUDA_ELEMENTWISE_DEF("Atanh", 9, FloatAndHalfTypes);
DPRUN_CUDA_ELEMENTWISE_DEF("IsNaN", 9, FloatAndHalfTypes);
DPRUN_CUDA_ELEMENTWISE_DEF("IsInf", 10, FloatAndHalfTypes);
DPRUN_CUDA_ELEMENTWISE_DEF("Not", 1, BoolTypes);
DPRUN_CUDA_ELEMENTWISE_DEF("BitwiseNot", 18, IntegralTypes);

}  // namespace
}  // namespace dprun::cuda_ew
