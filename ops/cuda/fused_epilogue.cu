#include "ops/cuda/fused_epilogue.h"

#include "ops/cuda/elementwise.cuh"
#include "ops/math/clip.h"
#include "ops/math/unary_functors.h"

namespace dprun {
namespace {

// Not unary_kernel: its input and output are __restrict__, and here they are one array.
template <class Op>
__global__ void in_place_kernel(Op op, float* data, int64_t n) {
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    data[i] = op(data[i]);
}

__global__ void bias_rows_kernel(const float* __restrict__ bias, float* __restrict__ y,
                                 int64_t total, int64_t cols) {
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    y[i] = bias[i % cols];
}

/// Clip to [lo, hi] (ops/math/clip.h).
struct ClipTo {
  float lo, hi;
  DPRUN_HOST_DEVICE float operator()(float v) const { return math::clip(v, lo, hi); }
};

template <class Op>
void launch_in_place(const KernelContext& ctx, Op op, float* data, int64_t n) {
  in_place_kernel<<<cuda_ew::blocks_for(n), cuda_ew::kThreads, 0, cuda_ew::stream_of(ctx)>>>(
      op, data, n);
  cuda_ew::check_launch(ctx);
}

}  // namespace

void CudaFusedActivation::apply(const KernelContext& ctx, float* data, int64_t n) const {
  if (n == 0) return;
  switch (kind) {
    case FusedActivationKind::None:
      return;
    case FusedActivationKind::Relu:
      return launch_in_place(ctx, math::Relu{}, data, n);
    case FusedActivationKind::Clip:
      return launch_in_place(ctx, ClipTo{lo, hi}, data, n);
    case FusedActivationKind::Sigmoid:
      return launch_in_place(ctx, math::Sigmoid{}, data, n);
    case FusedActivationKind::Swish:
      return launch_in_place(ctx, math::Silu{}, data, n);
    case FusedActivationKind::Gelu:
      return launch_in_place(ctx, math::GeluErfForm{}, data, n);
  }
}

void write_bias_rows(const KernelContext& ctx, const float* bias, float* y, int64_t rows,
                     int64_t cols) {
  const int64_t total = rows * cols;
  if (total == 0) return;
  bias_rows_kernel<<<cuda_ew::blocks_for(total), cuda_ew::kThreads, 0, cuda_ew::stream_of(ctx)>>>(
      bias, y, total, cols);
  cuda_ew::check_launch(ctx);
}

}  // namespace dprun
