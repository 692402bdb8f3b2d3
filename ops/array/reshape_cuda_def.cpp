// The CUDA Reshape, Flatten, Squeeze, Unsqueeze and Identity, views of the input's device
// memory (compute: ops/array/reshape_cuda.cpp, the CPU's view kernels).
#include "ops/cuda/defs/cuda_compute.h"

namespace dprun {
namespace {

DPRUN_REGISTER_KERNEL({.op_type = "Reshape",
                       .since = 1,
                       .device = DeviceType::CUDA,
                       .host_inputs = {1},
                       .factory = cuda_compute("Reshape")});
DPRUN_REGISTER_KERNEL({.op_type = "Flatten",
                       .since = 1,
                       .device = DeviceType::CUDA,
                       .factory = cuda_compute("Flatten")});
DPRUN_REGISTER_KERNEL({.op_type = "Squeeze",
                       .since = 1,
                       .device = DeviceType::CUDA,
                       .host_inputs = {1},
                       .factory = cuda_compute("Squeeze")});
DPRUN_REGISTER_KERNEL({.op_type = "Unsqueeze",
                       .since = 1,
                       .device = DeviceType::CUDA,
                       .host_inputs = {1},
                       .factory = cuda_compute("Unsqueeze")});
DPRUN_REGISTER_KERNEL({.op_type = "Identity",
                       .since = 1,
                       .device = DeviceType::CUDA,
                       .factory = cuda_compute("Identity")});

}  // namespace
}  // namespace dprun
