// The CUDA ScatterElements and Scatter (its name before opset 11), for the dtypes their
// reductions cover (compute: ops/array/scatter_elements.cu).
#include "ops/cuda/defs/cuda_compute.h"

namespace dprun {
namespace {

const std::vector<DType> kMovableTypes = {
    DType::Float32, DType::Float64, DType::Float16, DType::BFloat16, DType::Int8,
    DType::Int16,   DType::Int32,   DType::Int64,   DType::UInt8,    DType::UInt16,
    DType::UInt32,  DType::UInt64,  DType::Bool};

DPRUN_REGISTER_KERNEL({.op_type = "ScatterElements",
                       .since = 11,
                       .device = DeviceType::CUDA,
                       .dtypes = kMovableTypes,
                       .factory = cuda_compute("ScatterElements")});
DPRUN_REGISTER_KERNEL({.op_type = "Scatter",
                       .since = 9,
                       .device = DeviceType::CUDA,
                       .dtypes = kMovableTypes,
                       .factory = cuda_compute("Scatter")});

}  // namespace
}  // namespace dprun
