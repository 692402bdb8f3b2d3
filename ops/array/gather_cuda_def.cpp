// The CUDA Gather, for every dtype with int32 or int64 indices (compute: ops/array/gather.cu).
#include "ops/cuda/defs/cuda_compute.h"

namespace dprun {
namespace {

DPRUN_REGISTER_KERNEL({.op_type = "Gather",
                       .since = 1,
                       .device = DeviceType::CUDA,
                       .factory = cuda_compute("Gather")});

}  // namespace
}  // namespace dprun
