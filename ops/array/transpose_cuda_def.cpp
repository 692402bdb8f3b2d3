// The CUDA Transpose, for every dtype (compute: ops/array/transpose.cu).
#include "ops/cuda/defs/cuda_compute.h"

namespace dprun {
namespace {

DPRUN_REGISTER_KERNEL({.op_type = "Transpose",
                       .since = 1,
                       .device = DeviceType::CUDA,
                       .factory = cuda_compute("Transpose")});

}  // namespace
}  // namespace dprun
