// Slice on CUDA, for every dtype: a strided copy of the view the CPU kernel's arguments
// select (ops/cpu/slice.h: same clamping, negative steps as negative strides). The CPU
// kernel copies too, so the output never aliases the input here either.
#include "ops/cpu/slice.h"
#include "ops/cuda/strided_copy.h"

namespace dprun {
namespace {

DPRUN_REGISTER_KERNEL({.op_type = "Slice",
                       .since = 1,
                       .device = DeviceType::CUDA,
                       .host_inputs = {1, 2, 3, 4},
                       .factory = make_kernel<ViewCopyKernel<SliceParams, cuda_view_copy>>});

}  // namespace
}  // namespace dprun
