// The CUDA Slice, for every dtype (compute: ops/array/slice.cu).
#include "ops/cuda/defs/cuda_compute.h"

namespace dprun {
namespace {

DPRUN_REGISTER_KERNEL({.op_type = "Slice",
                       .since = 1,
                       .device = DeviceType::CUDA,
                       .host_inputs = {1, 2, 3, 4},
                       .factory = cuda_compute("Slice")});

}  // namespace
}  // namespace dprun
