// The compute of the CUDA Slice (defined in ops/array/slice_cuda_def.cpp), for every dtype: a
// strided copy of the view the CPU kernel's arguments select (ops/array/slice.h: same clamping,
// negative steps as negative strides). The CPU kernel copies too, so the output never aliases the
// input here either.
#include "ops/array/slice.h"
#include "ops/cuda/defs/cuda_compute.h"
#include "ops/cuda/strided_copy.h"

namespace dprun {
namespace {

using SliceCuda = ViewCopyKernel<SliceParams, cuda_view_copy>;

DPRUN_CUDA_COMPUTE("Slice", make_kernel<SliceCuda>);

}  // namespace
}  // namespace dprun
