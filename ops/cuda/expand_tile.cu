// Expand and Tile on CUDA, for every dtype: strided copies of the CPU kernels' views
// (ops/cpu/expand_tile.h), whose zero strides repeat input elements.
#include "ops/cpu/expand_tile.h"
#include "ops/cuda/strided_copy.h"

namespace dprun {
namespace {

DPRUN_REGISTER_KERNEL({.op_type = "Expand",
                       .since = 8,
                       .device = DeviceType::CUDA,
                       .host_inputs = {1},
                       .factory = make_kernel<ViewCopyKernel<ExpandParams, cuda_view_copy>>});
DPRUN_REGISTER_KERNEL({.op_type = "Tile",
                       .since = 1,
                       .device = DeviceType::CUDA,
                       .host_inputs = {1, 2},
                       .factory = make_kernel<ViewCopyKernel<TileParams, cuda_view_copy>>});

}  // namespace
}  // namespace dprun
