// The CUDA Expand and Tile, for every dtype (compute: ops/array/expand_tile.cu).
#include "ops/cuda/defs/cuda_compute.h"

namespace dprun {
namespace {

DPRUN_REGISTER_KERNEL({.op_type = "Expand",
                       .since = 8,
                       .device = DeviceType::CUDA,
                       .host_inputs = {1},
                       .factory = cuda_compute("Expand")});
DPRUN_REGISTER_KERNEL({.op_type = "Tile",
                       .since = 1,
                       .device = DeviceType::CUDA,
                       .host_inputs = {1, 2},
                       .factory = cuda_compute("Tile")});

}  // namespace
}  // namespace dprun
