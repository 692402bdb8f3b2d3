#pragma once
// The shapes of a ConvWeightGrad node (engine/rewrites/op_fusion.h), checked as every device's
// kernel checks them: the forward geometry, the result's window and whether dY is the
// convolution's output (the gradient's case, which the libraries' backward-weights primitives
// take as it is).
#include <algorithm>
#include <vector>

#include "engine/kernel.h"
#include "ops/common/conv_util.h"

namespace dprun {

/// The shapes of one ConvWeightGrad invocation.
struct WeightGradShapes {
  WindowGeometry g;  // the forward convolution; g.out is dY's spatial sizes
  /// Per spatial axis the kernel, or fewer where the Conv form computes fewer (dY at the stride
  /// reaches too far into X for the whole kernel).
  std::vector<int64_t> window;
  int64_t group = 1;
  Shape dw_shape;                      // [M, C / group, window...]
  bool is_convolution_output = false;  // window is the kernel, and dY the convolution's output
};

/// Checks float32 X [N, C, in...] and dY [N, M, out...] against the node's attributes (C and M
/// multiples of `group`) and resolves the shapes; fails naming what does not fit.
inline WeightGradShapes weight_grad_shapes(const KernelContext& ctx, const WindowAttrs& attrs,
                                           int64_t group, const Tensor& x, const Tensor& dy) {
  if (x.dtype() != DType::Float32 || dy.dtype() != DType::Float32)
    ctx.fail("X and dY must be float32, got ", dtype_name(x.dtype()), " and ",
             dtype_name(dy.dtype()));
  const auto rank = static_cast<int64_t>(attrs.kernel_shape.size()) + 2;
  if (x.rank() != rank || dy.rank() != rank || x.dim(0) != dy.dim(0))
    ctx.fail("X ", shape_to_string(x.shape()), " and dY ", shape_to_string(dy.shape()),
             " must have rank ", rank, " for kernel_shape ", shape_to_string(attrs.kernel_shape),
             " and one batch size");
  if (group < 1 || x.dim(1) % group != 0 || dy.dim(1) % group != 0)
    ctx.fail("X ", shape_to_string(x.shape()), " and dY ", shape_to_string(dy.shape()),
             " must have channels that group=", group, " divides");
  WeightGradShapes s;
  s.group = group;
  WindowGeometry& g = s.g;
  g.in.assign(x.shape().begin() + 2, x.shape().end());
  g.out.assign(dy.shape().begin() + 2, dy.shape().end());
  g.kernel = attrs.kernel_shape;
  attrs.fill(ctx.node(), g.kernel.size(), g.strides, g.dilations, g.pads_begin, g.pads_end);
  s.is_convolution_output = true;
  for (size_t i = 0; i < g.rank(); ++i) {
    const int64_t padded = g.in[i] + g.pads_begin[i] + g.pads_end[i];
    const int64_t dy_extent = (g.out[i] - 1) * g.strides[i] + 1;
    if (padded < dy_extent)
      ctx.fail("dY ", shape_to_string(dy.shape()), " spans ", dy_extent, " rows of axis ", i + 2,
               " at stride ", g.strides[i], ", more than the ", padded, " of padded X");
    s.window.push_back(std::min(g.kernel[i], (padded - dy_extent) / g.dilations[i] + 1));
    const int64_t span = padded - ((g.kernel[i] - 1) * g.dilations[i] + 1);
    if (s.window[i] != g.kernel[i] || span / g.strides[i] + 1 != g.out[i])
      s.is_convolution_output = false;
  }
  s.dw_shape = {dy.dim(1), x.dim(1) / group};
  s.dw_shape.insert(s.dw_shape.end(), s.window.begin(), s.window.end());
  return s;
}

}  // namespace dprun
