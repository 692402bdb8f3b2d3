// The compute of the CUDA MaxPool asking for its Indices output (defined in
// ops/pool/max_pool_indices_cuda_def.cpp): the pooling of a CNN's training graph, whose gradient
// scatters dY to the indices. cuDNN gives no indices, so the cuDNN MaxPool declines these nodes;
// without this kernel they would run on the host between copies of their activations. One thread
// per output element walks its window (the CPU's WindowGeometry, any pads, auto_pad, strides,
// dilations, ceil_mode; 1 to 3 spatial dims) in the CPU reference's order, row-major over the
// window's taps inside X, and keeps the first tap or a later one strictly greater: the first
// maximum wins ties, a NaN wins only as the first tap. Indices are flat over X, row-major or, for
// storage_order=1, column-major over the spatial dims after plane * plane size, as
// ops/pool/pool.cpp computes them. A window wholly in the padding gives the lowest value of the
// dtype and the plane's first index, as on the CPU. Float16 and bfloat16 are compared in float and
// the maximum stored back as the CPU kernel's float32 path narrows it (the padding's lowest float
// becomes -infinity), so 16-bit training graphs keep their pooling on the GPU.
#include <limits>
#include <memory>

#include "ops/common/conv_util.h"
#include "ops/cuda/defs/cuda_compute.h"
#include "ops/cuda/elementwise.cuh"
#include "ops/cuda/half_convert.cuh"
#include "ops/pool/pool_types.h"

namespace dprun {
namespace {

using cuda_pool::kMaxSpatial;
using cuda_pool::MaxPoolTypes;

/// The resolved windows of ND spatial dims, passed by value.
template <int ND>
struct PoolWindows {
  int64_t in[ND], out[ND], kernel[ND], strides[ND], dilations[ND], pads_begin[ND];
  int64_t in_size = 0, out_size = 0;  // elements per (batch, channel) plane
  bool column_major = false;
};

template <class T, int ND>
__global__ void max_pool_indices_kernel(const T* __restrict__ x, T* __restrict__ y,
                                        int64_t* __restrict__ indices, int64_t n, PoolWindows<ND> w,
                                        cuda_half::compute_t<T> lowest) {
  for (int64_t t = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; t < n;
       t += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t plane = t / w.out_size;
    int64_t rest = t - plane * w.out_size;
    // Per dim, the taps k in [lo, hi) put start + k * dilation inside [0, in); the CPU skips
    // the others, so walking only these keeps its order.
    int64_t start[ND], lo[ND], hi[ND], k[ND];
    bool empty = false;
#pragma unroll
    for (int d = ND - 1; d >= 0; --d) {
      start[d] = (rest % w.out[d]) * w.strides[d] - w.pads_begin[d];
      rest /= w.out[d];
      const int64_t dil = w.dilations[d];
      lo[d] = start[d] < 0 ? (-start[d] + dil - 1) / dil : 0;
      hi[d] = w.in[d] > start[d] ? min(w.kernel[d], (w.in[d] - start[d] + dil - 1) / dil) : 0;
      empty = empty || lo[d] >= hi[d];
      k[d] = lo[d];
    }
    const T* xs = x + plane * w.in_size;
    cuda_half::compute_t<T> best = lowest;
    int64_t arg = 0;
    if (!empty) {
      bool first = true;
      for (;;) {
        int64_t flat = 0;
#pragma unroll
        for (int d = 0; d < ND; ++d) flat = flat * w.in[d] + start[d] + k[d] * w.dilations[d];
        const auto v = cuda_half::load(xs[flat]);
        if (first || v > best) {
          best = v;
          arg = flat;
          first = false;
        }
        int d = ND - 1;
        for (; d >= 0; --d) {
          if (++k[d] < hi[d]) break;
          k[d] = lo[d];
        }
        if (d < 0) break;
      }
    }
    y[t] = cuda_half::store<T>(best);
    if (indices) {
      int64_t offset = arg;
      if (w.column_major) {
        // The same coordinates with the first spatial dim varying fastest.
        int64_t coord[ND];
#pragma unroll
        for (int d = ND - 1; d >= 0; --d) {
          coord[d] = arg % w.in[d];
          arg /= w.in[d];
        }
        offset = 0;
        int64_t mult = 1;
#pragma unroll
        for (int d = 0; d < ND; ++d) {
          offset += coord[d] * mult;
          mult *= w.in[d];
        }
      }
      indices[t] = plane * w.in_size + offset;
    }
  }
}

class MaxPoolIndicesCuda : public OpKernel {
 public:
  explicit MaxPoolIndicesCuda(const KernelInfo& info)
      : base_(info.node), column_major_(info.node.attr_int("storage_order", 0) == 1) {}

  void compute(KernelContext& ctx) const override {
    const Tensor& x = ctx.input(0);
    Shape out_shape;
    const WindowGeometry g = base_.geometry(ctx, x, out_shape);
    cuda_ew::dispatch(MaxPoolTypes{}, x.dtype(), ctx, [&](auto tag) {
      using T = decltype(tag);
      Tensor& y = ctx.allocate_output(0, out_shape, x.dtype());
      int64_t* indices = nullptr;
      if (ctx.output_count() > 1 && ctx.output_wanted(1))
        indices = ctx.allocate_output(1, out_shape, DType::Int64).data<int64_t>();
      const int64_t n = y.numel();
      if (n == 0) return;
      switch (g.rank()) {
        case 1:
          launch<T, 1>(ctx, g, x.data<T>(), y.data<T>(), indices, n);
          break;
        case 2:
          launch<T, 2>(ctx, g, x.data<T>(), y.data<T>(), indices, n);
          break;
        case 3:
          launch<T, 3>(ctx, g, x.data<T>(), y.data<T>(), indices, n);
          break;
        default:
          ctx.fail("MaxPool with Indices on CUDA takes 1 to ", kMaxSpatial, " spatial dims, got ",
                   g.rank());
      }
    });
  }

 private:
  template <class T, int ND>
  void launch(const KernelContext& ctx, const WindowGeometry& g, const T* x, T* y, int64_t* indices,
              int64_t n) const {
    PoolWindows<ND> w;
    w.in_size = w.out_size = 1;
    for (int d = 0; d < ND; ++d) {
      const auto du = static_cast<size_t>(d);
      w.in[d] = g.in[du];
      w.out[d] = g.out[du];
      w.kernel[d] = g.kernel[du];
      w.strides[d] = g.strides[du];
      w.dilations[d] = g.dilations[du];
      w.pads_begin[d] = g.pads_begin[du];
      w.in_size *= g.in[du];
      w.out_size *= g.out[du];
    }
    w.column_major = column_major_;
    max_pool_indices_kernel<T, ND>
        <<<cuda_ew::blocks_for(n), cuda_ew::kThreads, 0, cuda_ew::stream_of(ctx)>>>(
            x, y, indices, n, w, std::numeric_limits<cuda_half::compute_t<T>>::lowest());
    cuda_ew::check_launch(ctx);
  }

  PoolBase base_;
  bool column_major_ = false;
};

DPRUN_CUDA_COMPUTE("MaxPool/indices", make_kernel<MaxPoolIndicesCuda>);

}  // namespace
}  // namespace dprun
