// The CUDA Pad, for every dtype (compute: ops/array/pad.cu).
#include "ops/cuda/defs/cuda_compute.h"

namespace dprun {
namespace {

DPRUN_REGISTER_KERNEL({.op_type = "Pad",
                       .since = 1,
                       .device = DeviceType::CUDA,
                       .host_inputs = {1, 2, 3},
                       .factory = cuda_compute("Pad")});

}  // namespace
}  // namespace dprun
