#pragma once
// A Conv whose kernel is larger than its output is the weight gradient of another convolution
// (ops/grad/conv_grad.cpp emits dW = Conv(X^T, dY^T) with the batch and channel axes swapped
// and the forward strides as dilations). oneDNN's forward convolution runs such shapes as one
// huge-kernel correlation per output, several times slower than its backward-weights
// primitive, which computes the same sums:
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
#include "ops/cpu/conv_util.h"
#include "ops/cpu/onednn_util.h"

namespace dprun::onednn {

struct ConvBackwardWeightsPrimitive {
  bool usable = false;  // false: oneDNN rejected the shapes; run the forward path
  dnnl::primitive prim;
  dnnl::memory::desc src_view, diff_dst_view, diff_weights_view;  // views of A, B and the output
  dnnl::memory::desc src_md, diff_dst_md, diff_weights_md;        // the primitive's layouts
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

/// Runs it: `y` is the Conv's output (shape p.out_shape), written in place.
void execute_backward_weights(const KernelContext& ctx, const ConvBackwardWeightsPrimitive& p,
                              const Tensor& a, const Tensor& b, Tensor& y);

}  // namespace dprun::onednn
