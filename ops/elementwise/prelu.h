#pragma once
// PRelu's slope, shared by the CPU and CUDA kernels: it broadcasts unidirectionally to X.
// Before opset 7 a 1-D slope of X's channel count applies per channel (axis 1), as Caffe-era
// exporters assumed.
#include "ops/common/elementwise.h"

namespace dprun {

/// `slope` as it broadcasts to `x` (reshaped to [1, C, 1, ...] for a legacy per-channel slope;
/// a view, no copy). Fails naming the node when the dtypes differ or it does not broadcast
/// to X's shape. Reads only metadata.
inline Tensor prelu_slope(const KernelContext& ctx, const Tensor& x, Tensor slope, bool legacy) {
  if (x.dtype() != slope.dtype())
    ctx.fail("X is ", dtype_name(x.dtype()), " but slope is ", dtype_name(slope.dtype()));
  if (legacy && slope.rank() == 1 && slope.numel() > 1 && x.rank() >= 2 &&
      slope.numel() == x.shape()[1]) {
    Shape s(x.shape().size(), 1);
    s[1] = slope.numel();
    slope = slope.reshape(s);
  }
  if (!ew::broadcasts_to(slope.shape(), x.shape()))
    ctx.fail("slope of shape ", shape_to_string(slope.shape()),
             " does not broadcast to X of shape ", shape_to_string(x.shape()));
  return slope;
}

}  // namespace dprun
