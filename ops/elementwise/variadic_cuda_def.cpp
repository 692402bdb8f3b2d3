// The CUDA variadic Sum, Mean, Min, Max with numpy broadcasting of all inputs, as the CPU
// kernels (ops/elementwise/variadic.cpp) compute them (compute: ops/elementwise/variadic.cu).
#include "ops/cuda/defs/cuda_types.h"

namespace dprun::cuda_ew {
namespace {

DPRUN_CUDA_ELEMENTWISE_DEF("Sum", 1, NumericAndHalfTypes);
DPRUN_CUDA_ELEMENTWISE_DEF("Mean", 1, FloatAndHalfTypes);
DPRUN_CUDA_ELEMENTWISE_DEF("Min", 1, NumericAndHalfTypes);
DPRUN_CUDA_ELEMENTWISE_DEF("Max", 1, NumericAndHalfTypes);

}  // namespace
}  // namespace dprun::cuda_ew
