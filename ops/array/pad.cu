// The compute of the CUDA Pad (defined in ops/array/pad_cuda_def.cpp), for every dtype (elements
// move by size): the CPU kernel's arguments (ops/array/pad.h) and index mapping (math::pad_source),
// one thread per output element walking its coordinates from the last dimension. Padding values are
// launch arguments.
#include <cstring>

#include "ops/array/pad.h"
#include "ops/cuda/defs/cuda_compute.h"
#include "ops/cuda/elementwise.cuh"

namespace dprun::cuda_ew {
namespace {

/// The most dimensions a padded tensor may have on CUDA.
constexpr int kMaxPadRank = 16;

/// Dims of the output and input, the input's strides and each leading pad, passed by value.
struct PadIndex {
  int rank = 0;
  int64_t out_dims[kMaxPadRank];
  int64_t in_dims[kMaxPadRank];
  int64_t in_strides[kMaxPadRank];
  int64_t begin[kMaxPadRank];
};

template <class U>
__global__ void pad_kernel(const U* __restrict__ x, U* __restrict__ y, int64_t n, PadIndex ix,
                           math::PadMode mode, U fill) {
  for (int64_t t = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; t < n;
       t += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    int64_t rest = t, off = 0;
    bool pad = false;
    for (int d = ix.rank - 1; d >= 0 && !pad; --d) {
      const int64_t o = rest % ix.out_dims[d];
      rest /= ix.out_dims[d];
      const int64_t i = math::pad_source(mode, o - ix.begin[d], ix.in_dims[d]);
      pad = i < 0;
      off += i * ix.in_strides[d];
    }
    y[t] = pad ? fill : x[off];
  }
}

class PadCuda : public OpKernel {
 public:
  explicit PadCuda(const KernelInfo& info) : params_(info) {}

  void compute(KernelContext& ctx) const override {
    const Tensor& x = ctx.input(0);
    const PadLayout layout = params_.layout(ctx, x);
    Tensor& y = ctx.allocate_output(0, layout.out_shape, x.dtype());
    const int64_t n = y.numel();
    if (n == 0) return;
    const int rank = static_cast<int>(x.rank());
    if (rank > kMaxPadRank)
      ctx.fail("Pad on CUDA takes up to ", kMaxPadRank, " dims, got ", x.describe());
    PadIndex ix;
    ix.rank = rank;
    const std::vector<int64_t> strides = contiguous_strides(x.shape());
    for (int d = 0; d < rank; ++d) {
      const auto du = static_cast<size_t>(d);
      ix.out_dims[d] = layout.out_shape[du];
      ix.in_dims[d] = x.shape()[du];
      ix.in_strides[d] = strides[du];
      ix.begin[d] = layout.begin[du];
    }
    visit_element_size(dtype_size(x.dtype()), [&](auto tag) {
      using U = decltype(tag);
      U fill;
      std::memcpy(&fill, layout.fill.raw_data(), sizeof(U));
      pad_kernel<U><<<blocks_for(n), kThreads, 0, stream_of(ctx)>>>(
          static_cast<const U*>(x.raw_data()), static_cast<U*>(y.raw_data()), n, ix, params_.mode(),
          fill);
    });
    check_launch(ctx);
  }

 private:
  PadParams params_;
};

DPRUN_CUDA_COMPUTE("Pad", make_kernel<PadCuda>);

}  // namespace
}  // namespace dprun::cuda_ew
