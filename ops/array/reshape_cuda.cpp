// The compute of the CUDA Reshape, Flatten, Squeeze, Unsqueeze and Identity (defined in
// ops/array/reshape_cuda_def.cpp): the output is a view of the input's device memory, so the
// kernels every device shares (ops/array/view_kernels.h) serve unchanged; no data moves.
#include "ops/array/view_kernels.h"
#include "ops/cuda/defs/cuda_compute.h"

namespace dprun {
namespace {

DPRUN_CUDA_COMPUTE("Reshape", make_kernel<ReshapeKernel>);
DPRUN_CUDA_COMPUTE("Flatten", make_kernel<FlattenKernel>);
DPRUN_CUDA_COMPUTE("Squeeze", make_kernel<SqueezeKernel>);
DPRUN_CUDA_COMPUTE("Unsqueeze", make_kernel<UnsqueezeKernel>);
DPRUN_CUDA_COMPUTE("Identity", make_kernel<IdentityKernel>);

}  // namespace
}  // namespace dprun
