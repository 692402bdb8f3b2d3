#pragma once
// The cuDNN descriptors that one convolution call takes (Conv's forward, ConvTranspose's
// backward-data and ConvWeightGrad's backward-filter convolutions), set up in one place from
// the tensors' dims, the window geometry and the group count, in the order each kernel made
// them before: the two tensors, the filter, then the convolution.
#include <cstdint>
#include <vector>

#include "engine/dtype.h"
#include "engine/kernel.h"
#include "ops/common/conv_util.h"
#include "ops/cuda/cudnn_util.h"

namespace dprun::cudnn {

/// NCHW filter dims [out_channels, in_per_group, kernel...].
std::vector<int64_t> filter_dims(int64_t out_channels, int64_t in_per_group,
                                 const std::vector<int64_t>& kernel);

/// The descriptors of one convolution whose tensors are all of `dtype` (float32, float16 or
/// bfloat16), dense NCHW: x the convolution's input side ([N, C, in...]), y its output side
/// ([N, M, out...]), w the filter (filter_dims) and conv the cross-correlation with symmetric
/// `pads` and g's strides and dilations. conv is in FMA math unless `allow_tf32` (cuDNN's
/// default math then), and in tensor-op math for 16-bit dtypes (float32 sums on tensor cores),
/// until the caller sets the math type of the algorithm it picks.
struct ConvDescriptors {
  ConvDescriptors(const KernelContext& ctx, const std::vector<int64_t>& x_dims,
                  const std::vector<int64_t>& y_dims, const std::vector<int64_t>& w_dims,
                  DType dtype, const std::vector<int64_t>& pads, const WindowGeometry& g,
                  int64_t group, bool allow_tf32);

  TensorDesc x;
  TensorDesc y;
  FilterDesc w;
  ConvDesc conv;
};

}  // namespace dprun::cudnn
