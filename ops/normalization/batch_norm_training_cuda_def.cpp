// The CUDA BatchNormalization in training mode, X float32 or float64 (compute:
// ops/normalization/batch_norm_training.cu).
#include "ops/cuda/defs/cuda_compute.h"
#include "ops/normalization/batch_norm_checks.h"

namespace dprun {
namespace {

/// Taken: the nodes the CPU kernel runs in training mode, except spatial=0 before opset 9 and
/// parameters known to be other than float32/float64 (those run on the host).
bool batch_norm_training_fits(const KernelInfo& info) {
  if (!batch_norm_training(info)) return false;
  if (info.opset < 9 && info.node.attr_int("spatial", 1) == 0) return false;
  for (size_t i = 1; i < 5 && i < info.input_types.size(); ++i) {
    const auto& type = info.input_types[i];
    if (type && type->dtype != DType::Undefined && type->dtype != DType::Float32 &&
        type->dtype != DType::Float64)
      return false;
  }
  return true;
}

DPRUN_REGISTER_KERNEL({.op_type = "BatchNormalization",
                       .since = 1,
                       .device = DeviceType::CUDA,
                       .dtypes = {DType::Float32, DType::Float64},
                       .impl = "training",
                       .accepts = batch_norm_training_fits,
                       .factory = cuda_compute("BatchNormalization/training")});

}  // namespace
}  // namespace dprun
