// The CUDA Cast and CastLike between the dtypes of ops/elementwise/cast_types.h (compute:
// ops/elementwise/cast.cu). Declined (run on the host): targets of other dtypes (string), and the
// string-named `to` of Cast-1..5.
#include "engine/kernel.h"
#include "ops/cuda/defs/cuda_compute.h"
#include "ops/elementwise/cast_types.h"

namespace dprun {
namespace {

/// Cast-6+ names its target by number; Cast-1..5's type names and targets not converted here
/// are left to the host kernel, which also reports the bad ones.
bool cast_target_converted(const KernelInfo& info) {
  const Attribute* a = info.node.find_attr("to");
  return a && a->kind == Attribute::Kind::Int && is_cast_type(static_cast<DType>(a->i));
}

/// Declines a CastLike whose target dtype (input 1's) is known and not converted here.
bool cast_like_target_converted(const KernelInfo& info) {
  const auto& types = info.input_types;
  return !(types.size() > 1 && types[1] && types[1]->dtype != DType::Undefined &&
           !is_cast_type(types[1]->dtype));
}

DPRUN_REGISTER_KERNEL({.op_type = "Cast",
                       .since = 1,
                       .device = DeviceType::CUDA,
                       .dtypes = kCastTypes,
                       .accepts = cast_target_converted,
                       .factory = cuda_compute("Cast")});
DPRUN_REGISTER_KERNEL({.op_type = "CastLike",
                       .since = 15,
                       .device = DeviceType::CUDA,
                       .dtypes = kCastTypes,
                       .accepts = cast_like_target_converted,
                       .factory = cuda_compute("CastLike")});

}  // namespace
}  // namespace dprun
