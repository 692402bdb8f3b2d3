#pragma once
// oneDNN's backward-weights primitive for the weight gradients of convolutions, in two forms.
//
// 1. ConvWeightGrad(X, dY) (engine/rewrites/op_fusion.h) names the forward convolution's
// geometry and group, which the primitive takes as it is (build_weight_gradient; a group above
// 1 as oneDNN's grouped weights [G, M / G, C / G, kernel...], which dW's [M, C / G, kernel...]
// is in memory).
//
// 2. A group-1 Conv whose kernel is larger than its output is the weight gradient of another
// convolution (ops/conv/conv_grad.cpp emits dW = Conv(X^T, dY^T) with the batch and channel axes
// swapped and the forward strides as dilations). oneDNN's forward convolution runs such shapes as
// one huge-kernel correlation per output, several times slower than its backward-weights primitive,
// which computes the same sums:
//
//   Conv(A [Na, Ca, H...], B [Cb, Ca, K...]) -> [Na, Cb, O...]
//   = convolution_backward_weights(src = A viewed as [Ca, Na, H...],
//                                  diff_dst = B viewed as [Ca, Cb, K...]) -> [Cb, Na, O...]
//
// with the Conv's dilations as the forward strides and its strides as the forward dilations.
// A and B are copied into channels-last order of those views (a tiled transpose), which the
// primitive takes as they are.
#include <vector>

#include "engine/kernel.h"
#include "ops/common/conv_util.h"
#include "ops/cpu/onednn_util.h"

namespace dprun::onednn {

struct ConvBackwardWeightsPrimitive {
  bool usable = false;  // false: oneDNN rejected the shapes (form 2: run the forward path)
  dnnl::primitive prim;
  // How the operands and the output are stored: form 1 plain, form 2 views of A, B and the
  // output with their first two axes swapped.
  dnnl::memory::desc src_view, diff_dst_view, diff_weights_view;
  bool swapped = false;                                     // form 2
  dnnl::memory::desc src_md, diff_dst_md, diff_weights_md;  // the primitive's layouts
  dnnl::memory::desc scratchpad_md;
  Shape out_shape;
};

/// True when a group-1 Conv of these shapes is better run as a backward-weights primitive:
/// its kernel has more elements than its output has per channel.
bool prefer_backward_weights(const Shape& a, const Shape& b, const WindowGeometry& g);

/// Builds the primitive for Conv(A, B) with the resolved geometry `g` (group 1, no bias).
/// Leaves `usable` false when oneDNN rejects it or the geometry has no backward-weights form.
ConvBackwardWeightsPrimitive build_backward_weights(const Shape& a, const Shape& b,
                                                    const WindowGeometry& g);

/// Form 1: the gradient dW [M, C / group, kernel...] of a convolution of X [N, C, in...] into
/// dY [N, M, out...] with geometry `g` (g.kernel, strides, dilations, pads; g.out must be the
/// forward convolution's output for g.in) and `group` (dividing C and M). Leaves `usable` false
/// when oneDNN rejects it.
ConvBackwardWeightsPrimitive build_weight_gradient(const Shape& x, const Shape& dy,
                                                   const WindowGeometry& g, int64_t group = 1);

/// Runs either form: `y` is the result (shape p.out_shape), written in place; `a` and `b` are
/// X and dY (form 1) or the Conv's A and B (form 2).
void execute_backward_weights(const KernelContext& ctx, const ConvBackwardWeightsPrimitive& p,
                              const Tensor& a, const Tensor& b, Tensor& y);

}  // namespace dprun::onednn
