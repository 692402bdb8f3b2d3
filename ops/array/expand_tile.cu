// The compute of the CUDA Expand and Tile (defined in ops/array/expand_tile_cuda_def.cpp), for
// every dtype: strided copies of the CPU kernels' views (ops/array/expand_tile.h), whose zero
// strides repeat input elements.
#include "ops/array/expand_tile.h"
#include "ops/cuda/defs/cuda_compute.h"
#include "ops/cuda/strided_copy.h"

namespace dprun {
namespace {

using ExpandCuda = ViewCopyKernel<ExpandParams, cuda_view_copy>;
using TileCuda = ViewCopyKernel<TileParams, cuda_view_copy>;

DPRUN_CUDA_COMPUTE("Expand", make_kernel<ExpandCuda>);
DPRUN_CUDA_COMPUTE("Tile", make_kernel<TileCuda>);

}  // namespace
}  // namespace dprun
