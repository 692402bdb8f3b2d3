// Reduce{Sum,Mean,Max,Min,Prod,L1,L2,LogSum,LogSumExp,SumSquare} on CUDA for float32, float64,
// int32 and int64, with the semantics of ops/cpu/reduce.cpp: the same axes rules (attribute
// before opset 13 for ReduceSum and 18 for the others, optional input afterwards with
// noop_with_empty_axes), the same accumulator types (double for floating inputs and for
// Mean/L2/LogSum/LogSumExp; the input type for integer sums, products and extrema, which wrap),
// the same identities for empty reductions, NaN propagating through Max and Min, and
// LogSumExp shifted by each output's maximum when that is finite. Other dtypes (16-bit floats,
// bool, 8/16-bit and unsigned integers) have no CUDA definition and run on the host.
//
// Dimensions of size 1 are dropped and neighbours that are both kept or both reduced merged.
// [kept, reduced] with long rows gets one block per output and a block reduction; [reduced,
// kept], [kept, reduced, kept] and short rows get one thread per output walking its column
// (neighbouring threads read neighbouring addresses). Any other layout is first transposed
// (ops/cuda/transpose.h) so that the reduced dimensions come last, then reduced as rows.
#include <cuda_runtime_api.h>

#include <cmath>
#include <limits>
#include <type_traits>

#include "ops/cpu/data_movement.h"
#include "ops/cpu/reduce_common.h"
#include "ops/cuda/elementwise_layout.h"
#include "ops/cuda/reduce.cuh"
#include "ops/cuda/transpose.h"

namespace dprun {
namespace {

using cuda_reduce::block_reduce;

enum class ReduceOp { Sum, Mean, Max, Min, Prod, L1, L2, LogSum, LogSumExp, SumSquare };

/// The accumulator type, as on the CPU: double for floating inputs and for reductions whose
/// result is not an integer, T itself for integer sums, products and extrema.
template <ReduceOp Op, class T>
using acc_t =
    std::conditional_t<std::is_floating_point_v<T> || Op == ReduceOp::Mean || Op == ReduceOp::L2 ||
                           Op == ReduceOp::LogSum || Op == ReduceOp::LogSumExp,
                       double, T>;

/// The value an empty reduction starts from (computed on the host, passed to the kernels).
template <ReduceOp Op, class A>
A identity_of() {
  using L = std::numeric_limits<A>;
  if constexpr (Op == ReduceOp::Max)
    return L::has_infinity ? -L::infinity() : L::lowest();
  else if constexpr (Op == ReduceOp::Min)
    return L::has_infinity ? L::infinity() : L::max();
  else if constexpr (Op == ReduceOp::Prod)
    return A(1);
  else
    return A(0);
}

/// map (per element, given the LogSumExp shift), combine and finalize for one reduction.
template <ReduceOp Op, class A>
struct DeviceReducer {
  __device__ static A map(A x, A shift) {
    if constexpr (Op == ReduceOp::L1) {
      if constexpr (std::is_signed_v<A>) return x < A(0) ? A(-x) : x;
      return x;
    } else if constexpr (Op == ReduceOp::L2 || Op == ReduceOp::SumSquare) {
      return static_cast<A>(x * x);
    } else if constexpr (Op == ReduceOp::LogSumExp) {
      return exp(x - shift);
    } else {
      return x;
    }
  }
  __device__ A operator()(A a, A b) const {
    // b != b: NaN (never true for integers), which Max and Min propagate.
    if constexpr (Op == ReduceOp::Max)
      return (b > a || b != b) ? b : a;
    else if constexpr (Op == ReduceOp::Min)
      return (b < a || b != b) ? b : a;
    else if constexpr (Op == ReduceOp::Prod)
      return static_cast<A>(a * b);
    else
      return static_cast<A>(a + b);
  }
  __device__ static A finalize(A acc, int64_t count, A shift) {
    if constexpr (Op == ReduceOp::Mean)
      return acc / static_cast<A>(count);
    else if constexpr (Op == ReduceOp::L2)
      return sqrt(acc);
    else if constexpr (Op == ReduceOp::LogSum)
      return log(acc);
    else if constexpr (Op == ReduceOp::LogSumExp)
      return log(acc) + shift;
    else
      return acc;
  }
};

/// LogSumExp's shift: the maximum when finite, else 0 so inf and NaN propagate as in the plain
/// formula (the CPU kernel's rule).
__device__ inline double finite_or_zero(double m) {
  return isfinite(m) ? m : 0.0;
}

/// One block per row of `red` contiguous elements.
template <ReduceOp Op, class T, class A>
__global__ void reduce_rows_kernel(const T* x, T* y, int64_t rows, int64_t red, A identity) {
  using R = DeviceReducer<Op, A>;
  __shared__ A scratch[cuda_reduce::kScratch];
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T* row = x + r * red;
    A shift = A(0);
    if constexpr (Op == ReduceOp::LogSumExp) {
      using M = DeviceReducer<ReduceOp::Max, A>;
      A m = -INFINITY;
      for (int64_t j = threadIdx.x; j < red; j += blockDim.x) m = M{}(m, static_cast<A>(row[j]));
      shift = finite_or_zero(block_reduce(m, A(-INFINITY), M{}, scratch));
    }
    A acc = identity;
    for (int64_t j = threadIdx.x; j < red; j += blockDim.x)
      acc = R{}(acc, R::map(static_cast<A>(row[j]), shift));
    acc = block_reduce(acc, identity, R{}, scratch);
    if (threadIdx.x == 0) y[r] = static_cast<T>(R::finalize(acc, red, shift));
  }
}

/// One thread per output of the [outer, red, inner] view.
template <ReduceOp Op, class T, class A>
__global__ void reduce_columns_kernel(const T* x, T* y, int64_t outer, int64_t red, int64_t inner,
                                      A identity) {
  using R = DeviceReducer<Op, A>;
  const int64_t columns = outer * inner;
  for (int64_t t = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; t < columns;
       t += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const T* col = x + (t / inner) * red * inner + t % inner;
    A shift = A(0);
    if constexpr (Op == ReduceOp::LogSumExp) {
      using M = DeviceReducer<ReduceOp::Max, A>;
      A m = -INFINITY;
      for (int64_t j = 0; j < red; ++j) m = M{}(m, static_cast<A>(col[j * inner]));
      shift = finite_or_zero(m);
    }
    A acc = identity;
    for (int64_t j = 0; j < red; ++j) acc = R{}(acc, R::map(static_cast<A>(col[j * inner]), shift));
    y[t] = static_cast<T>(R::finalize(acc, red, shift));
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
  using A = acc_t<Op, T>;
  const cudaStream_t stream = cuda_ew::stream_of(ctx);
  const A identity = identity_of<Op, A>();
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

class ReduceCuda : public OpKernel {
 public:
  ReduceCuda(const KernelInfo& info, ReduceOp op) : op_(op) {
    const Node& node = info.node;
    keepdims_ = node.attr_int("keepdims", 1) != 0;
    const int64_t input_since = node.op_type == "ReduceSum" ? 13 : 18;
    axes_from_input_ = info.opset >= input_since;
    if (axes_from_input_) {
      noop_with_empty_axes_ = node.attr_int("noop_with_empty_axes", 0) != 0;
      if (node.has_attr("axes"))
        node.fail("axes is an input from opset ", input_since, ", not an attribute");
    } else if (node.has_attr("axes")) {
      axes_attr_ = node.attr_ints("axes");
      has_axes_attr_ = true;
    }
  }

  void compute(KernelContext& ctx) const override {
    const Tensor& x = ctx.input(0);
    const int64_t rank = x.rank();
    std::vector<int64_t> axes;
    bool all = false;
    if (axes_from_input_) {
      if (const Tensor* t = ctx.optional_input(1)) {
        if (t->rank() > 1) ctx.fail("axes must be 1-D, got shape ", shape_to_string(t->shape()));
        if (t->dtype() != DType::Int32 && t->dtype() != DType::Int64)
          ctx.fail("axes must be int32 or int64, got ", dtype_name(t->dtype()));
        axes = read_int64_values(*t, ctx, "axes");  // copies device axes to the host
      }
      if (axes.empty()) {
        if (noop_with_empty_axes_) {
          ctx.set_output(0, x);
          return;
        }
        all = true;
      }
    } else if (has_axes_attr_) {
      axes = axes_attr_;
      all = axes.empty();  // an explicitly empty attribute still means all axes
    } else {
      all = true;
    }
    std::vector<bool> reduce_dim(static_cast<size_t>(rank), all);
    if (!all)
      for (int64_t a : normalize_axes(ctx.node(), axes, rank))
        reduce_dim[static_cast<size_t>(a)] = true;
    Shape out_shape;
    for (int64_t d = 0; d < rank; ++d) {
      if (!reduce_dim[static_cast<size_t>(d)])
        out_shape.push_back(x.shape()[static_cast<size_t>(d)]);
      else if (keepdims_)
        out_shape.push_back(1);
    }
    Tensor& y = ctx.allocate_output(0, out_shape, x.dtype());
    if (y.numel() == 0) return;
    const ReducePlan plan = plan_reduce(x.shape(), reduce_dim);
    Tensor source = x;
    if (!plan.perm.empty()) {
      source = Tensor::empty({x.numel()}, x.dtype(), ctx.device());
      cuda_transpose_into(ctx, x, plan.perm, source);
    }
    auto run = [&](auto tag) {
      using T = decltype(tag);
      const T* xp = source.data<T>();
      T* yp = y.data<T>();
      switch (op_) {
        case ReduceOp::Sum:
          return launch_reduce<ReduceOp::Sum>(ctx, xp, yp, plan);
        case ReduceOp::Mean:
          return launch_reduce<ReduceOp::Mean>(ctx, xp, yp, plan);
        case ReduceOp::Max:
          return launch_reduce<ReduceOp::Max>(ctx, xp, yp, plan);
        case ReduceOp::Min:
          return launch_reduce<ReduceOp::Min>(ctx, xp, yp, plan);
        case ReduceOp::Prod:
          return launch_reduce<ReduceOp::Prod>(ctx, xp, yp, plan);
        case ReduceOp::L1:
          return launch_reduce<ReduceOp::L1>(ctx, xp, yp, plan);
        case ReduceOp::L2:
          return launch_reduce<ReduceOp::L2>(ctx, xp, yp, plan);
        case ReduceOp::LogSum:
          return launch_reduce<ReduceOp::LogSum>(ctx, xp, yp, plan);
        case ReduceOp::LogSumExp:
          return launch_reduce<ReduceOp::LogSumExp>(ctx, xp, yp, plan);
        case ReduceOp::SumSquare:
          return launch_reduce<ReduceOp::SumSquare>(ctx, xp, yp, plan);
      }
    };
    switch (x.dtype()) {
      case DType::Float32:
        return run(float{});
      case DType::Float64:
        return run(double{});
      case DType::Int32:
        return run(int32_t{});
      case DType::Int64:
        return run(int64_t{});
      default:
        ctx.fail("input dtype ", dtype_name(x.dtype()), " is not supported on CUDA");
    }
  }

 private:
  ReduceOp op_;
  bool keepdims_ = true;
  bool axes_from_input_ = false;
  bool noop_with_empty_axes_ = false;
  bool has_axes_attr_ = false;
  std::vector<int64_t> axes_attr_;
};

template <ReduceOp Op>
std::unique_ptr<OpKernel> make_reduce(const KernelInfo& info) {
  return std::make_unique<ReduceCuda>(info, Op);
}

#define DPRUN_CUDA_REDUCE(name, op)                                                              \
  DPRUN_REGISTER_KERNEL({.op_type = name,                                                        \
                         .since = 1,                                                             \
                         .device = DeviceType::CUDA,                                             \
                         .dtypes = {DType::Float32, DType::Float64, DType::Int32, DType::Int64}, \
                         .factory = make_reduce<op>})

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

}  // namespace
}  // namespace dprun
