// Expand and Tile, both expressed as strided copies with zero strides over repeated dims
// (the views come from ops/cpu/expand_tile.h).
#include "ops/cpu/expand_tile.h"

namespace dprun {
namespace {

DPRUN_REGISTER_KERNEL({.op_type = "Expand",
                       .since = 8,
                       .factory = make_kernel<ViewCopyKernel<ExpandParams, cpu_view_copy>>});
DPRUN_REGISTER_KERNEL({.op_type = "Tile",
                       .since = 1,
                       .factory = make_kernel<ViewCopyKernel<TileParams, cpu_view_copy>>});

}  // namespace
}  // namespace dprun
