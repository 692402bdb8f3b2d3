// The CUDA binary arithmetic with numpy broadcasting (compute: ops/elementwise/binary_arith.cu):
// Add, Sub, Mul over the CPU's numeric types; Div and Pow over float32/64, float16 and bfloat16.
// Integer Div is left to the CPU: it must fail on a zero divisor, which a GPU kernel cannot
// report without a sync.
#include "ops/cuda/defs/cuda_types.h"

namespace dprun::cuda_ew {
namespace {

DPRUN_CUDA_ELEMENTWISE_DEF("Add", 1, NumericAndHalfTypes);
DPRUN_CUDA_ELEMENTWISE_DEF("Sub", 1, NumericAndHalfTypes);
DPRUN_CUDA_ELEMENTWISE_DEF("Mul", 1, NumericAndHalfTypes);
DPRUN_CUDA_ELEMENTWISE_DEF("Div", 1, FloatAndHalfTypes);
// The base's dtypes; the exponent may be of any of NumericAndHalfTypes (opset 12+).
DPRUN_CUDA_ELEMENTWISE_DEF("Pow", 1, FloatAndHalfTypes);

}  // namespace
}  // namespace dprun::cuda_ew
