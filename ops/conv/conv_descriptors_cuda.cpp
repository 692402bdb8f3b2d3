#include "ops/conv/conv_descriptors_cuda.h"

namespace dprun::cudnn {

std::vector<int64_t> filter_dims(int64_t out_channels, int64_t in_per_group,
                                 const std::vector<int64_t>& kernel) {
  std::vector<int64_t> dims = {out_channels, in_per_group};
  dims.insert(dims.end(), kernel.begin(), kernel.end());
  return dims;
}

ConvDescriptors::ConvDescriptors(const KernelContext& ctx, const std::vector<int64_t>& x_dims,
                                 const std::vector<int64_t>& y_dims,
                                 const std::vector<int64_t>& w_dims, DType dtype,
                                 const std::vector<int64_t>& pads, const WindowGeometry& g,
                                 int64_t group, bool allow_tf32)
    : x(ctx, x_dims, {}, data_type_of(dtype)),
      y(ctx, y_dims, {}, data_type_of(dtype)),
      w(ctx, w_dims, data_type_of(dtype)),
      conv(ctx, pads, g.strides, g.dilations, group, allow_tf32) {
  // 16-bit operands go to tensor cores as they are: float32 sums, as the CPU's 16-bit Conv.
  if (is_16bit_float(dtype)) conv.set_math(CUDNN_TENSOR_OP_MATH);
}

}  // namespace dprun::cudnn
