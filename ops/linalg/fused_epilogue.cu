#include "ops/linalg/fused_epilogue_cuda.h"

#include "ops/cuda/elementwise.cuh"
#include "ops/cuda/half_convert.cuh"
#include "ops/math/clip.h"
#include "ops/math/unary_functors.h"

namespace dprun {
namespace {

// Not unary_kernel: its input and output are __restrict__, and here they are one array.
template <class T, class Op>
__global__ void in_place_kernel(Op op, T* data, int64_t n) {
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    data[i] = cuda_half::store<T>(op(static_cast<float>(cuda_half::load(data[i]))));
}

template <class T>
__global__ void bias_rows_kernel(const T* __restrict__ bias, T* __restrict__ y, int64_t total,
                                 int64_t cols) {
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
void launch_in_place(const KernelContext& ctx, Op op, void* data, DType dtype, int64_t n) {
  visit_dtype_among<float, Float16, BFloat16>(dtype, [&](auto tag) {
    using T = decltype(tag);
    in_place_kernel<<<cuda_ew::blocks_for(n), cuda_ew::kThreads, 0, cuda_ew::stream_of(ctx)>>>(
        op, static_cast<T*>(data), n);
  });
  cuda_ew::check_launch(ctx);
}

}  // namespace

void CudaFusedActivation::apply(const KernelContext& ctx, void* data, DType dtype,
                                int64_t n) const {
  if (n == 0) return;
  switch (kind) {
    case FusedActivationKind::None:
      return;
    case FusedActivationKind::Relu:
      return launch_in_place(ctx, math::Relu{}, data, dtype, n);
    case FusedActivationKind::Clip:
      return launch_in_place(ctx, ClipTo{lo, hi}, data, dtype, n);
    case FusedActivationKind::Sigmoid:
      return launch_in_place(ctx, math::Sigmoid{}, data, dtype, n);
    case FusedActivationKind::Swish:
      return launch_in_place(ctx, math::Silu{}, data, dtype, n);
    case FusedActivationKind::Gelu:
      return launch_in_place(ctx, math::GeluErfForm{}, data, dtype, n);
  }
}

void write_bias_rows(const KernelContext& ctx, const void* bias, void* y, DType dtype, int64_t rows,
                     int64_t cols) {
  const int64_t total = rows * cols;
  if (total == 0) return;
  visit_dtype_among<float, Float16, BFloat16>(dtype, [&](auto tag) {
    using T = decltype(tag);
    bias_rows_kernel<<<cuda_ew::blocks_for(total), cuda_ew::kThreads, 0, cuda_ew::stream_of(ctx)>>>(
        static_cast<const T*>(bias), static_cast<T*>(y), total, cols);
  });
  cuda_ew::check_launch(ctx);
}

}  // namespace dprun
