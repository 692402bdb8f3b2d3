// The CUDA comparisons (Equal, Less, LessOrEqual, Greater, GreaterOrEqual) over the CPU's
// numeric types (Equal also bool) and logical And, Or, Xor (compute:
// ops/elementwise/compare_logic.cu).
#include "ops/cuda/defs/cuda_types.h"

namespace dprun::cuda_ew {
namespace {

DPRUN_CUDA_ELEMENTWISE_DEF("Equal", 1, EqualTypes);
DPRUN_CUDA_ELEMENTWISE_DEF("Less", 1, NumericAndHalfTypes);
DPRUN_CUDA_ELEMENTWISE_DEF("LessOrEqual", 12, NumericAndHalfTypes);
DPRUN_CUDA_ELEMENTWISE_DEF("Greater", 1, NumericAndHalfTypes);
DPRUN_CUDA_ELEMENTWISE_DEF("GreaterOrEqual", 12, NumericAndHalfTypes);
DPRUN_CUDA_ELEMENTWISE_DEF("And", 1, BoolTypes);
DPRUN_CUDA_ELEMENTWISE_DEF("Or", 1, BoolTypes);
DPRUN_CUDA_ELEMENTWISE_DEF("Xor", 1, BoolTypes);

}  // namespace
}  // namespace dprun::cuda_ew
