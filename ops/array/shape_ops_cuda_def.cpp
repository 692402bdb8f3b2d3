// The CUDA Shape, Size and ConstantOfShape (compute: ops/array/shape_ops.cu).
#include "ops/cuda/defs/cuda_compute.h"

namespace dprun {
namespace {

DPRUN_REGISTER_KERNEL(
    {.op_type = "Shape", .since = 1, .device = DeviceType::CUDA, .factory = cuda_compute("Shape")});
DPRUN_REGISTER_KERNEL(
    {.op_type = "Size", .since = 1, .device = DeviceType::CUDA, .factory = cuda_compute("Size")});
DPRUN_REGISTER_KERNEL({.op_type = "ConstantOfShape",
                       .since = 9,
                       .device = DeviceType::CUDA,
                       .host_inputs = {0},
                       .factory = cuda_compute("ConstantOfShape")});

}  // namespace
}  // namespace dprun
