// The CUDA Concat and Split, for every dtype (compute: ops/array/concat_split.cu).
#include "ops/cuda/defs/cuda_compute.h"

namespace dprun {
namespace {

DPRUN_REGISTER_KERNEL({.op_type = "Concat",
                       .since = 1,
                       .device = DeviceType::CUDA,
                       .factory = cuda_compute("Concat")});
DPRUN_REGISTER_KERNEL({.op_type = "Split",
                       .since = 1,
                       .device = DeviceType::CUDA,
                       .host_inputs = {1},
                       .factory = cuda_compute("Split")});

}  // namespace
}  // namespace dprun
