// Reshape, Flatten, Squeeze, Unsqueeze, Identity on CUDA: the output is a view of the input's
// device memory, so the CPU kernels (view_kernels.h) serve unchanged; no data moves.
#include "ops/cpu/view_kernels.h"

namespace dprun {
namespace {

DPRUN_REGISTER_KERNEL({.op_type = "Reshape",
                       .since = 1,
                       .device = DeviceType::CUDA,
                       .host_inputs = {1},
                       .factory = make_kernel<ReshapeKernel>});
DPRUN_REGISTER_KERNEL({.op_type = "Flatten",
                       .since = 1,
                       .device = DeviceType::CUDA,
                       .factory = make_kernel<FlattenKernel>});
DPRUN_REGISTER_KERNEL({.op_type = "Squeeze",
                       .since = 1,
                       .device = DeviceType::CUDA,
                       .host_inputs = {1},
                       .factory = make_kernel<SqueezeKernel>});
DPRUN_REGISTER_KERNEL({.op_type = "Unsqueeze",
                       .since = 1,
                       .device = DeviceType::CUDA,
                       .host_inputs = {1},
                       .factory = make_kernel<UnsqueezeKernel>});
DPRUN_REGISTER_KERNEL({.op_type = "Identity",
                       .since = 1,
                       .device = DeviceType::CUDA,
                       .factory = make_kernel<IdentityKernel>});

}  // namespace
}  // namespace dprun
