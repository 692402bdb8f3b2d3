#pragma once
// Clip's arguments, shared by the CPU and CUDA kernels. Opsets 1-10 take min/max as float
// attributes (float inputs only); 11+ take optional scalar inputs of the input's dtype.
#include <limits>

#include "engine/kernel.h"

namespace dprun {

class ClipParams {
 public:
  explicit ClipParams(const KernelInfo& info) : attrs_(info.opset < 11) {
    if (attrs_) {
      min_ = info.node.attr_float("min", -std::numeric_limits<float>::infinity());
      max_ = info.node.attr_float("max", std::numeric_limits<float>::infinity());
    }
  }

  /// True when the bounds are the min/max attributes (opsets 1-10), false when inputs.
  bool from_attributes() const { return attrs_; }
  float min_attr() const { return min_; }
  float max_attr() const { return max_; }

  /// Checks a bound input (`name` is "min" or "max"): one element of dtype `x_dtype`. Reads
  /// only its metadata, so a bound in device memory stays there.
  static void check_bound(const KernelContext& ctx, const Tensor& t, DType x_dtype,
                          const char* name) {
    if (t.dtype() != x_dtype)
      ctx.fail(name, " is ", dtype_name(t.dtype()), " but input is ", dtype_name(x_dtype));
    if (t.numel() != 1) ctx.fail(name, " must be a scalar, got shape ", shape_to_string(t.shape()));
  }

 private:
  bool attrs_;
  float min_ = 0, max_ = 0;
};

}  // namespace dprun
