// The CUDA Constant, one device copy of the value per GPU (compute: ops/array/constant_cuda.cpp).
#include "ops/cuda/defs/cuda_compute.h"

namespace dprun {
namespace {

/// Declines a Constant whose value is a string tensor, which has no device form: such a
/// Constant runs on the host. Reads the attribute the value is built from
/// (engine/constant_value.h: `value` comes first, and only it can hold strings); a node whose
/// value cannot be built is taken, so that its compute fails naming what is wrong.
bool constant_not_string(const KernelInfo& info) {
  const Attribute* value = info.node.find_attr("value");
  return value == nullptr || value->kind != Attribute::Kind::Tensor || !value->t.defined() ||
         value->t.dtype() != DType::String;
}

DPRUN_REGISTER_KERNEL({.op_type = "Constant",
                       .since = 1,
                       .device = DeviceType::CUDA,
                       .accepts = constant_not_string,
                       .factory = cuda_compute("Constant")});

}  // namespace
}  // namespace dprun
