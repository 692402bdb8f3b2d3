// The compute of Reduce{Sum,Mean,Max,Min,Prod,L1,L2,LogSum,LogSumExp,SumSquare} on CUDA
// (defined in ops/reduce/reduce_cuda_def.cpp) for float32, float64, float16, bfloat16, int32 and
// int64, with the semantics of ops/reduce/reduce.cpp: the same axes rules and output shape
// (ReduceAxes, ops/reduce/reduce_axes.h) and the same per-element math, accumulator types and
// identities (Reducer, ops/math/reduce_functors.h; floats accumulate in double, a 16-bit result
// is rounded through float as the CPU's is); LogSumExp is shifted by each output's maximum when
// that is finite, as on the CPU. Other dtypes (bool, 8/16-bit and unsigned integers) have no
// CUDA definition and run on the host.
//
// Dimensions of size 1 are dropped and neighbours that are both kept or both reduced merged.
// [kept, reduced] with long rows gets one block per output and a block reduction; [reduced,
// kept], [kept, reduced, kept] and short rows get one thread per output walking its column
// (neighbouring threads read neighbouring addresses). Any other layout is first transposed
// (permuted_view, ops/common/data_movement.h) so that the reduced dimensions come last, then reduced
// as rows.
#include <cuda_runtime_api.h>

#include <cmath>
#include <limits>
#include <type_traits>

#include "ops/cuda/defs/cuda_compute.h"
#include "ops/cuda/elementwise_layout.h"
#include "ops/cuda/half_convert.cuh"
#include "ops/cuda/reduce.cuh"
#include "ops/cuda/strided_copy.h"
#include "ops/reduce/reduce_axes.h"

namespace dprun {
namespace {

using cuda_half::load;
using cuda_half::store;
using cuda_reduce::block_reduce;

/// Reducer<Op, A>::combine as a functor, for the block reduction.
template <ReduceOp Op, class A>
struct Combine {
  __device__ A operator()(A a, A b) const { return Reducer<Op, A>::combine(a, b); }
};

/// LogSumExp's shift: the maximum when finite, else 0 so inf and NaN propagate as in the plain
/// formula (the CPU kernel's rule).
__device__ inline double finite_or_zero(double m) {
  return isfinite(m) ? m : 0.0;
}

/// One block per row of `red` contiguous elements.
template <ReduceOp Op, class T, class A>
__global__ void reduce_rows_kernel(const T* x, T* y, int64_t rows, int64_t red, A identity) {
  using R = Reducer<Op, A>;
  __shared__ A scratch[cuda_reduce::kScratch];
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T* row = x + r * red;
    A shift = A(0);
    if constexpr (Op == ReduceOp::LogSumExp) {
      using M = Combine<ReduceOp::Max, A>;
      A m = -INFINITY;
      for (int64_t j = threadIdx.x; j < red; j += blockDim.x)
        m = M{}(m, static_cast<A>(load(row[j])));
      shift = finite_or_zero(block_reduce(m, A(-INFINITY), M{}, scratch));
    }
    A acc = identity;
    for (int64_t j = threadIdx.x; j < red; j += blockDim.x)
      acc = R::combine(acc, R::map(static_cast<A>(load(row[j])), shift));
    acc = block_reduce(acc, identity, Combine<Op, A>{}, scratch);
    if (threadIdx.x == 0) y[r] = store<T>(R::finalize(acc, red, shift));
  }
}

/// One thread per output of the [outer, red, inner] view.
template <ReduceOp Op, class T, class A>
__global__ void reduce_columns_kernel(const T* x, T* y, int64_t outer, int64_t red, int64_t inner,
                                      A identity) {
  using R = Reducer<Op, A>;
  const int64_t columns = outer * inner;
  for (int64_t t = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; t < columns;
       t += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const T* col = x + (t / inner) * red * inner + t % inner;
    A shift = A(0);
    if constexpr (Op == ReduceOp::LogSumExp) {
      A m = -INFINITY;
      for (int64_t j = 0; j < red; ++j)
        m = Reducer<ReduceOp::Max, A>::combine(m, static_cast<A>(load(col[j * inner])));
      shift = finite_or_zero(m);
    }
    A acc = identity;
    for (int64_t j = 0; j < red; ++j)
      acc = R::combine(acc, R::map(static_cast<A>(load(col[j * inner])), shift));
    y[t] = store<T>(R::finalize(acc, red, shift));
  }
}

/// Rows shorter than this are reduced one thread per output: a block would idle.
constexpr int64_t kMinBlockRow = 32;

/// How the input is reduced: as [outer, red, inner] (inner == 1 for rows), after an optional
/// transpose that moves the reduced dimensions last.
struct ReducePlan {
  int64_t outer = 1, red = 1, inner = 1;
  std::vector<int64_t> perm;  // non-empty: transpose by it first
};

ReducePlan plan_reduce(const Shape& shape, const std::vector<bool>& reduce_dim) {
  std::vector<int64_t> sizes;
  std::vector<bool> reduced;
  int64_t kept_total = 1, red_total = 1;
  for (size_t d = 0; d < shape.size(); ++d) {
    (reduce_dim[d] ? red_total : kept_total) *= shape[d];
    if (shape[d] == 1) continue;
    if (!sizes.empty() && reduced.back() == reduce_dim[d]) {
      sizes.back() *= shape[d];
    } else {
      sizes.push_back(shape[d]);
      reduced.push_back(reduce_dim[d]);
    }
  }
  ReducePlan p;
  const size_t n = sizes.size();
  if (n == 0) return p;         // one element, reduced alone
  if (n == 1 && !reduced[0]) {  // nothing reduced: each element alone
    p.outer = sizes[0];
    return p;
  }
  if (reduced.back() && n <= 2) {  // [red] or [kept, red]: contiguous rows
    p.outer = kept_total;
    p.red = red_total;
    return p;
  }
  if (n == 2 || (n == 3 && !reduced[0])) {  // [red, kept] or [kept, red, kept]
    p.outer = n == 3 ? sizes[0] : 1;
    p.red = red_total;
    p.inner = sizes[n - 1];
    return p;
  }
  for (int pass = 0; pass < 2; ++pass)  // kept dims first, then the reduced ones
    for (size_t d = 0; d < shape.size(); ++d)
      if (reduce_dim[d] == (pass == 1)) p.perm.push_back(static_cast<int64_t>(d));
  p.outer = kept_total;
  p.red = red_total;
  return p;
}

template <ReduceOp Op, class T>
void launch_reduce(const KernelContext& ctx, const T* x, T* y, const ReducePlan& p) {
  using A = acc_type_t<Op, T>;
  const cudaStream_t stream = cuda_ew::stream_of(ctx);
  const A identity = Reducer<Op, A>::init();
  if (p.inner == 1 && p.red >= kMinBlockRow) {
    reduce_rows_kernel<Op, T, A>
        <<<cuda_reduce::grid_for(p.outer), cuda_reduce::row_threads(p.red), 0, stream>>>(
            x, y, p.outer, p.red, identity);
  } else {
    constexpr int kThreads = 256;
    reduce_columns_kernel<Op, T, A>
        <<<cuda_reduce::grid_for((p.outer * p.inner + kThreads - 1) / kThreads), kThreads, 0,
           stream>>>(x, y, p.outer, p.red, p.inner, identity);
  }
  cuda_ew::check_launch(ctx);
}

template <ReduceOp Op>
class ReduceCuda : public OpKernel {
 public:
  explicit ReduceCuda(const KernelInfo& info) : axes_(info) {}

  void compute(KernelContext& ctx) const override {
    const Tensor& x = ctx.input(0);
    const ReduceAxes::Resolved r = axes_.resolve(ctx, x);
    if (r.noop) {
      ctx.set_output(0, x);
      return;
    }
    Tensor& y = ctx.allocate_output(0, r.out_shape, x.dtype());
    if (y.numel() == 0) return;
    const ReducePlan plan = plan_reduce(x.shape(), r.reduce_dim);
    Tensor source = x;
    if (!plan.perm.empty()) {
      source = Tensor::empty({x.numel()}, x.dtype(), ctx.device());
      cuda_view_copy(ctx, x, permuted_view(x.shape(), plan.perm), source);
    }
    switch (x.dtype()) {
      case DType::Float32:
        return launch_reduce<Op>(ctx, source.data<float>(), y.data<float>(), plan);
      case DType::Float64:
        return launch_reduce<Op>(ctx, source.data<double>(), y.data<double>(), plan);
      case DType::Float16:
        return launch_reduce<Op>(ctx, source.data<Float16>(), y.data<Float16>(), plan);
      case DType::BFloat16:
        return launch_reduce<Op>(ctx, source.data<BFloat16>(), y.data<BFloat16>(), plan);
      case DType::Int32:
        return launch_reduce<Op>(ctx, source.data<int32_t>(), y.data<int32_t>(), plan);
      case DType::Int64:
        return launch_reduce<Op>(ctx, source.data<int64_t>(), y.data<int64_t>(), plan);
      default:
        ctx.fail("input dtype ", dtype_name(x.dtype()), " is not supported on CUDA");
    }
  }

 private:
  ReduceAxes axes_;
};

#define DPRUN_CUDA_REDUCE(name, op) DPRUN_CUDA_COMPUTE(name, make_kernel<ReduceCuda<op>>)

DPRUN_CUDA_REDUCE("ReduceSum", ReduceOp::Sum);
DPRUN_CUDA_REDUCE("ReduceMean", ReduceOp::Mean);
DPRUN_CUDA_REDUCE("ReduceMax", ReduceOp::Max);
DPRUN_CUDA_REDUCE("ReduceMin", ReduceOp::Min);
DPRUN_CUDA_REDUCE("ReduceProd", ReduceOp::Prod);
DPRUN_CUDA_REDUCE("ReduceL1", ReduceOp::L1);
DPRUN_CUDA_REDUCE("ReduceL2", ReduceOp::L2);
DPRUN_CUDA_REDUCE("ReduceLogSum", ReduceOp::LogSum);
DPRUN_CUDA_REDUCE("ReduceLogSumExp", ReduceOp::LogSumExp);
DPRUN_CUDA_REDUCE("ReduceSumSquare", ReduceOp::SumSquare);

#undef DPRUN_CUDA_REDUCE

}  // namespace
}  // namespace dprun
