// The compute of ArgMax and ArgMin on CUDA (defined in ops/reduce/argmax_cuda_def.cpp; float32,
// float16 or bfloat16 input, compared widened to float, which keeps every order and NaN; int64
// output), with the semantics of ops/reduce/argmax.cpp: the index along `axis` of the first extreme
// value, or of the last with select_last_index. The CPU kernel scans from element 0 with strict
// (or, for the last index, non-strict) comparisons, so a NaN at index 0 wins (nothing compares
// better than it) and a NaN anywhere else is never chosen. Other dtypes have no CUDA definition and
// run on the host.
//
// Contiguous rows (inner == 1) of at least a warp get one block per row: each thread keeps the
// best (value, index) of its strided elements, then the block combines those candidates with
// an order-independent rule (better value, then lower or higher index), skipping NaNs, and
// applies the index-0 NaN rule at the end. Strided rows get one thread per output running the
// CPU kernel's scan.
#include <cuda_runtime_api.h>

#include <cmath>

#include "ops/cuda/defs/cuda_compute.h"
#include "ops/cuda/elementwise_layout.h"
#include "ops/cuda/half_convert.cuh"
#include "ops/cuda/reduce.cuh"
#include "ops/reduce/reduce_axes.h"

namespace dprun {
namespace {

using cuda_reduce::kWarp;

/// A candidate extreme; index < 0 when there is none yet.
struct Candidate {
  float value;
  int64_t index;
};

/// The better of two candidates from disjoint index sets, whatever their order.
template <bool kMax>
__device__ Candidate better_of(Candidate a, Candidate b, bool last) {
  if (a.index < 0) return b;
  if (b.index < 0) return a;
  if (kMax ? b.value > a.value : b.value < a.value) return b;
  if (kMax ? a.value > b.value : a.value < b.value) return a;
  return (last ? b.index > a.index : b.index < a.index) ? b : a;
}

template <bool kMax>
__device__ Candidate warp_best(Candidate c, bool last) {
  for (int offset = kWarp / 2; offset > 0; offset /= 2) {
    const Candidate other{__shfl_xor_sync(0xffffffffu, c.value, offset),
                          __shfl_xor_sync(0xffffffffu, c.index, offset)};
    c = better_of<kMax>(c, other, last);
  }
  return c;
}

template <bool kMax, class T>
__global__ void arg_rows_kernel(const T* x, int64_t* y, int64_t rows, int64_t d, bool last) {
  __shared__ Candidate scratch[cuda_reduce::kScratch];
  const int lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp;
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T* row = x + r * d;
    Candidate c{0.f, -1};
    for (int64_t j = threadIdx.x; j < d; j += blockDim.x) {
      const float v = cuda_half::load(row[j]);
      if (!isnan(v)) c = better_of<kMax>(c, Candidate{v, j}, last);
    }
    c = warp_best<kMax>(c, last);
    __syncthreads();  // the previous row's readers are done with scratch
    if (lane == 0) scratch[warp] = c;
    __syncthreads();
    if (warp == 0) {
      c = warp_best<kMax>(
          lane < static_cast<int>(blockDim.x) / kWarp ? scratch[lane] : Candidate{0.f, -1}, last);
      // A NaN first element is kept by the scan; otherwise a non-NaN element exists.
      if (lane == 0) y[r] = isnan(static_cast<float>(cuda_half::load(row[0]))) ? 0 : c.index;
    }
  }
}

template <bool kMax, class T>
__global__ void arg_columns_kernel(const T* x, int64_t* y, int64_t outer, int64_t d, int64_t inner,
                                   bool last) {
  const int64_t columns = outer * inner;
  for (int64_t t = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; t < columns;
       t += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const T* col = x + (t / inner) * d * inner + t % inner;
    float best = cuda_half::load(col[0]);
    int64_t index = 0;
    for (int64_t j = 1; j < d; ++j) {
      const float v = cuda_half::load(col[j * inner]);
      const bool better = kMax ? (last ? v >= best : v > best) : (last ? v <= best : v < best);
      if (better) {
        best = v;
        index = j;
      }
    }
    y[t] = index;
  }
}

template <bool kMax>
class ArgCuda : public OpKernel {
 public:
  explicit ArgCuda(const KernelInfo& info) : axis_(info) {}

  void compute(KernelContext& ctx) const override {
    const Tensor& x = ctx.input(0);
    if (x.dtype() != DType::Float32 && !is_16bit_float(x.dtype()))
      ctx.fail("expects float32, float16 or bfloat16 on CUDA, got ", x.describe());
    const ArgAxis::Dims dims = axis_.dims(ctx, x.shape());
    const int64_t outer = dims.outer, d = dims.d, inner = dims.inner;
    Tensor& y = ctx.allocate_output(0, dims.out_shape, DType::Int64);
    if (y.numel() == 0) return;
    if (d == 0) ctx.fail("cannot take the arg", kMax ? "max" : "min", " of an empty axis");
    const bool last = axis_.select_last();
    const cudaStream_t stream = cuda_ew::stream_of(ctx);
    visit_dtype_among<float, Float16, BFloat16>(x.dtype(), [&](auto tag) {
      using T = decltype(tag);
      const T* xs = x.data<T>();
      if (inner == 1 && d >= kWarp) {
        arg_rows_kernel<kMax>
            <<<cuda_reduce::grid_for(outer), cuda_reduce::row_threads(d), 0, stream>>>(
                xs, y.data<int64_t>(), outer, d, last);
      } else {
        constexpr int kThreads = 256;
        arg_columns_kernel<kMax>
            <<<cuda_reduce::grid_for((outer * inner + kThreads - 1) / kThreads), kThreads, 0,
               stream>>>(xs, y.data<int64_t>(), outer, d, inner, last);
      }
    });
    cuda_ew::check_launch(ctx);
  }

 private:
  ArgAxis axis_;
};

DPRUN_CUDA_COMPUTE("ArgMax", make_kernel<ArgCuda<true>>);
DPRUN_CUDA_COMPUTE("ArgMin", make_kernel<ArgCuda<false>>);

}  // namespace
}  // namespace dprun
