#pragma once
// Softmax-family axis rules shared by the CPU and CUDA kernels.
//
// Before opset 13 the input is coerced to 2-D at `axis` (default 1): every dimension from
// `axis` on forms one row. From opset 13 the operation runs along the single dimension `axis`
// (default -1). Both become [outer, D, inner]; inner == 1 means contiguous rows.
#include <cstdint>

#include "ops/common/reduce_common.h"

namespace dprun {

/// The input viewed as [outer, D, inner], the softmax running along D.
struct SoftmaxDims {
  int64_t outer = 1, d = 1, inner = 1;
};

/// A Softmax, LogSoftmax or Hardmax node's axis attribute under its opset's semantics.
class SoftmaxAxis {
 public:
  explicit SoftmaxAxis(const KernelInfo& info)
      : coerce_2d_(info.opset < 13), axis_(info.node.attr_int("axis", info.opset < 13 ? 1 : -1)) {}

  /// The [outer, D, inner] view of an input of `shape`; fails on an out-of-range axis.
  SoftmaxDims dims(const KernelContext& ctx, const Shape& shape) const {
    const int64_t rank = static_cast<int64_t>(shape.size());
    SoftmaxDims s;
    if (rank == 0) {
      if (axis_ != 0 && axis_ != -1) ctx.fail("axis ", axis_, " is out of range for a scalar");
    } else if (coerce_2d_) {
      // axis == rank is allowed by the 2-D coercion (a [N, 1] view).
      if (axis_ < -rank || axis_ > rank)
        ctx.fail("axis ", axis_, " is out of range for rank ", rank);
      const int64_t a = axis_ < 0 ? axis_ + rank : axis_;
      s.outer = dims_product(shape, 0, a);
      s.d = dims_product(shape, a, rank);
    } else {
      if (axis_ < -rank || axis_ >= rank)
        ctx.fail("axis ", axis_, " is out of range for rank ", rank);
      const int64_t a = axis_ < 0 ? axis_ + rank : axis_;
      s.outer = dims_product(shape, 0, a);
      s.d = shape[static_cast<size_t>(a)];
      s.inner = dims_product(shape, a + 1, rank);
    }
    return s;
  }

 private:
  bool coerce_2d_;
  int64_t axis_;
};

}  // namespace dprun
