// The compute of the CUDA LayerNormalization (defined in ops/normalization/layer_norm_cuda_def.cpp;
// float32, float64, float16 and bfloat16), with the semantics of ops/normalization/layer_norm.cpp:
// X normalized over dims [axis, rank), times Scale, plus the optional B (both unidirectionally
// broadcast to X.shape[axis:]); optional outputs Mean and InvStdDev of shape X.shape[:axis] + [1,
// ...], float64 for float64 X and float32 otherwise. As on the CPU, the row statistics are
// accumulated in double (two passes: mean, then the mean squared deviation) whatever stash_type
// asks, and y = (x - mean)
// * inv_std * scale + bias is evaluated in float64 for float64 X and float32 otherwise, step by
// step (no fused multiply-add, which the CPU formula does not have either); a 16-bit y is rounded
// once.
//
// One block per normalized row. Scale and B must have X's dtype: a node whose Scale or B has
// another dtype is declined by the definition when its types are known (it then runs on the
// host).
#include <cuda_runtime_api.h>

#include <cmath>
#include <type_traits>

#include "ops/common/broadcast.h"
#include "ops/cuda/defs/cuda_compute.h"
#include "ops/cuda/elementwise_layout.h"
#include "ops/cuda/half_convert.cuh"
#include "ops/cuda/reduce.cuh"
#include "ops/cuda/strided_copy.h"
#include "ops/normalization/layer_norm_util.h"

namespace dprun {
namespace {

using cuda_half::load;
using cuda_half::store;
using cuda_reduce::block_reduce;

/// The type y is computed in, and Mean and InvStdDev stored in: double for double, else float.
template <class T>
using stat_t = std::conditional_t<std::is_same_v<T, double>, double, float>;

struct SumOp {
  __device__ double operator()(double a, double b) const { return a + b; }
};

/// (x - mean) * inv * scale, each step rounded on its own: nvcc may not contract the formula
/// into fused multiply-adds, which the CPU's does not have either.
template <class T>
__device__ T scaled_deviation(T x, T mean, T inv, T scale) {
  if constexpr (std::is_same_v<T, float>)
    return __fmul_rn(__fmul_rn(__fsub_rn(x, mean), inv), scale);
  else
    return __dmul_rn(__dmul_rn(__dsub_rn(x, mean), inv), scale);
}

template <class T>
__device__ T add_rounded(T a, T b) {
  if constexpr (std::is_same_v<T, float>)
    return __fadd_rn(a, b);
  else
    return __dadd_rn(a, b);
}

/// One block per row of d elements; bias, mean_out and inv_out may be null.
template <class T>
__global__ void layer_norm_kernel(const T* x, const T* scale, const T* bias, T* y,
                                  stat_t<T>* mean_out, stat_t<T>* inv_out, int64_t rows, int64_t d,
                                  double epsilon) {
  using C = stat_t<T>;
  __shared__ double scratch[cuda_reduce::kScratch];
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T* xr = x + r * d;
    T* yr = y + r * d;
    double sum = 0.0;
    for (int64_t j = threadIdx.x; j < d; j += blockDim.x) sum += static_cast<double>(load(xr[j]));
    sum = block_reduce(sum, 0.0, SumOp{}, scratch);
    const double mean = d > 0 ? sum / static_cast<double>(d) : 0.0;
    double sq = 0.0;
    for (int64_t j = threadIdx.x; j < d; j += blockDim.x) {
      const double dev = static_cast<double>(load(xr[j])) - mean;
      sq += dev * dev;
    }
    sq = block_reduce(sq, 0.0, SumOp{}, scratch);
    const double var = d > 0 ? sq / static_cast<double>(d) : 0.0;
    const C m = static_cast<C>(mean);
    const C inv = static_cast<C>(1.0 / sqrt(var + epsilon));
    for (int64_t j = threadIdx.x; j < d; j += blockDim.x) {
      const C v = scaled_deviation<C>(load(xr[j]), m, inv, load(scale[j]));
      yr[j] = store<T>(bias ? add_rounded<C>(v, load(bias[j])) : v);
    }
    if (threadIdx.x == 0) {
      if (mean_out) mean_out[r] = m;
      if (inv_out) inv_out[r] = inv;
    }
  }
}

/// `param` as a device array of the normalized shape's element count: itself when its
/// elements already line up, else a broadcast copy in `storage`. Fails like the CPU kernel
/// when the shapes do not broadcast.
template <class T>
const T* expanded_param(const KernelContext& ctx, const Tensor& param, const Shape& target,
                        const char* what, Tensor& storage) {
  check_param_broadcast(ctx, param.shape(), target, what);
  if (param.dtype() != dtype_of<T>())
    ctx.fail(what, " must have the input's dtype on CUDA, got ", param.describe());
  const int64_t n = shape_numel(target);
  if (param.numel() == n) return param.data<T>();
  storage = Tensor::empty({n}, param.dtype(), ctx.device());
  const StridedView view{.shape = target,
                         .strides = broadcast_strides(param.shape(), target.size())};
  cuda_view_copy(ctx, param, view, storage);
  return storage.data<T>();
}

class LayerNormCuda : public OpKernel {
 public:
  explicit LayerNormCuda(const KernelInfo& info) : attrs_(info) {}

  void compute(KernelContext& ctx) const override {
    switch (ctx.input(0).dtype()) {
      case DType::Float32:
        return run<float>(ctx);
      case DType::Float64:
        return run<double>(ctx);
      case DType::Float16:
        return run<Float16>(ctx);
      case DType::BFloat16:
        return run<BFloat16>(ctx);
      default:
        ctx.fail("input dtype ", dtype_name(ctx.input(0).dtype()), " is not supported on CUDA");
    }
  }

 private:
  template <class T>
  void run(KernelContext& ctx) const {
    const Tensor& x = ctx.input(0);
    const LayerNormRun ln = start_layer_norm(ctx, x, attrs_.axis);
    Tensor scale_storage, bias_storage;
    const T* scale = expanded_param<T>(ctx, ctx.input(1), ln.norm_shape, "Scale", scale_storage);
    const T* bias = nullptr;
    if (const Tensor* b = ctx.optional_input(2))
      bias = expanded_param<T>(ctx, *b, ln.norm_shape, "B", bias_storage);
    if (ln.rows == 0) return;
    layer_norm_kernel<T><<<cuda_reduce::grid_for(ln.rows), cuda_reduce::row_threads(ln.d), 0,
                           cuda_ew::stream_of(ctx)>>>(
        x.data<T>(), scale, bias, ln.y->data<T>(), ln.mean ? ln.mean->data<stat_t<T>>() : nullptr,
        ln.inv_std ? ln.inv_std->data<stat_t<T>>() : nullptr, ln.rows, ln.d,
        static_cast<double>(attrs_.epsilon));
    cuda_ew::check_launch(ctx);
  }

  LayerNormAttrs attrs_;
};

DPRUN_CUDA_COMPUTE("LayerNormalization", make_kernel<LayerNormCuda>);

}  // namespace
}  // namespace dprun
