// LayerNormalization on CUDA (float32 and float64), with the semantics of
// ops/cpu/layer_norm.cpp: X normalized over dims [axis, rank), times Scale, plus the optional
// B (both unidirectionally broadcast to X.shape[axis:]); optional outputs Mean and InvStdDev of
// shape X.shape[:axis] + [1, ...] in X's dtype. As on the CPU, the row statistics are
// accumulated in double (two passes: mean, then the mean squared deviation) whatever stash_type
// asks, and y = (x - mean) * inv_std * scale + bias is evaluated in X's type, step by step
// (no fused multiply-add, which the CPU formula does not have either).
//
// One block per normalized row. Scale and B must have X's dtype: a node whose Scale or B has
// another dtype is declined by the factory when its types are known (it then runs on the host).
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>

#include "ops/cpu/broadcast.h"
#include "ops/cpu/reduce_common.h"
#include "ops/cuda/elementwise_layout.h"
#include "ops/cuda/reduce.cuh"

namespace dprun {
namespace {

using cuda_reduce::block_reduce;

struct SumOp {
  __device__ double operator()(double a, double b) const { return a + b; }
};

// Separately rounded arithmetic, so nvcc cannot contract the formula into FMAs.
__device__ inline float sub_rn(float a, float b) {
  return __fsub_rn(a, b);
}
__device__ inline double sub_rn(double a, double b) {
  return __dsub_rn(a, b);
}
__device__ inline float mul_rn(float a, float b) {
  return __fmul_rn(a, b);
}
__device__ inline double mul_rn(double a, double b) {
  return __dmul_rn(a, b);
}
__device__ inline float add_rn(float a, float b) {
  return __fadd_rn(a, b);
}
__device__ inline double add_rn(double a, double b) {
  return __dadd_rn(a, b);
}

/// One block per row of d elements; bias, mean_out and inv_out may be null.
template <class T>
__global__ void layer_norm_kernel(const T* x, const T* scale, const T* bias, T* y, T* mean_out,
                                  T* inv_out, int64_t rows, int64_t d, double epsilon) {
  __shared__ double scratch[cuda_reduce::kScratch];
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T* xr = x + r * d;
    T* yr = y + r * d;
    double sum = 0.0;
    for (int64_t j = threadIdx.x; j < d; j += blockDim.x) sum += static_cast<double>(xr[j]);
    sum = block_reduce(sum, 0.0, SumOp{}, scratch);
    const double mean = d > 0 ? sum / static_cast<double>(d) : 0.0;
    double sq = 0.0;
    for (int64_t j = threadIdx.x; j < d; j += blockDim.x) {
      const double dev = static_cast<double>(xr[j]) - mean;
      sq += dev * dev;
    }
    sq = block_reduce(sq, 0.0, SumOp{}, scratch);
    const double var = d > 0 ? sq / static_cast<double>(d) : 0.0;
    const T m = static_cast<T>(mean);
    const T inv = static_cast<T>(1.0 / sqrt(var + epsilon));
    for (int64_t j = threadIdx.x; j < d; j += blockDim.x) {
      const T v = mul_rn(mul_rn(sub_rn(xr[j], m), inv), scale[j]);
      yr[j] = bias ? add_rn(v, bias[j]) : v;
    }
    if (threadIdx.x == 0) {
      if (mean_out) mean_out[r] = m;
      if (inv_out) inv_out[r] = inv;
    }
  }
}

constexpr int kMaxExpandRank = 8;

/// A parameter's element strides along each dim of the normalized shape (0 where it
/// broadcasts).
struct ExpandIndex {
  int rank = 0;
  int64_t dims[kMaxExpandRank];
  int64_t strides[kMaxExpandRank];
};

template <class T>
__global__ void expand_kernel(const T* param, T* out, ExpandIndex ix, int64_t n) {
  for (int64_t t = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; t < n;
       t += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    int64_t rest = t, offset = 0;
    for (int k = ix.rank - 1; k >= 0; --k) {
      offset += rest % ix.dims[k] * ix.strides[k];
      rest /= ix.dims[k];
    }
    out[t] = param[offset];
  }
}

/// `param` as a device array of the normalized shape's element count: itself when its
/// elements already line up, else a broadcast copy in `storage`. Fails like the CPU kernel
/// when the shapes do not broadcast.
template <class T>
const T* expanded_param(const KernelContext& ctx, const Tensor& param, const Shape& target,
                        const char* what, Tensor& storage) {
  const Shape& ps = param.shape();
  bool ok = ps.size() <= target.size();
  for (size_t i = 0; ok && i < ps.size(); ++i) {
    const int64_t pd = ps[ps.size() - 1 - i], td = target[target.size() - 1 - i];
    ok = pd == td || pd == 1;
  }
  if (!ok)
    ctx.fail(what, " of shape ", shape_to_string(ps),
             " does not broadcast to the normalized shape ", shape_to_string(target));
  if (param.dtype() != dtype_of<T>())
    ctx.fail(what, " must have the input's dtype on CUDA, got ", param.describe());
  const int64_t n = shape_numel(target);
  if (param.numel() == n) return param.data<T>();
  if (target.size() > kMaxExpandRank)
    ctx.fail("broadcasts ", what, " over at most ", kMaxExpandRank,
             " normalized dimensions on CUDA, got ", shape_to_string(target));
  ExpandIndex ix;
  ix.rank = static_cast<int>(target.size());
  const std::vector<int64_t> strides = broadcast_strides(ps, target.size());
  std::copy(target.begin(), target.end(), ix.dims);
  std::copy(strides.begin(), strides.end(), ix.strides);
  storage = Tensor::empty({n}, param.dtype(), ctx.device());
  if (n > 0) {
    constexpr int kThreads = 256;
    expand_kernel<T><<<cuda_reduce::grid_for((n + kThreads - 1) / kThreads), kThreads, 0,
                       cuda_ew::stream_of(ctx)>>>(param.data<T>(), storage.data<T>(), ix, n);
    cuda_ew::check_launch(ctx);
  }
  return storage.data<T>();
}

class LayerNormCuda : public OpKernel {
 public:
  explicit LayerNormCuda(const KernelInfo& info)
      : axis_(info.node.attr_int("axis", -1)), epsilon_(info.node.attr_float("epsilon", 1e-5f)) {}

  void compute(KernelContext& ctx) const override {
    const Tensor& x = ctx.input(0);
    const int64_t rank = x.rank();
    if (axis_ < -rank || axis_ >= rank)
      ctx.fail("axis ", axis_, " is out of range for input shape ", shape_to_string(x.shape()));
    const int64_t a = axis_ < 0 ? axis_ + rank : axis_;
    const int64_t rows = dims_product(x.shape(), 0, a);
    const int64_t d = dims_product(x.shape(), a, rank);
    const Shape norm_shape(x.shape().begin() + a, x.shape().end());
    Shape stat_shape(x.shape().begin(), x.shape().begin() + a);
    stat_shape.resize(static_cast<size_t>(rank), 1);
    Tensor& y = ctx.allocate_output(0, x.shape(), x.dtype());
    Tensor* mean_out = nullptr;
    Tensor* inv_out = nullptr;
    if (ctx.output_count() > 1 && ctx.output_wanted(1))
      mean_out = &ctx.allocate_output(1, stat_shape, x.dtype());
    if (ctx.output_count() > 2 && ctx.output_wanted(2))
      inv_out = &ctx.allocate_output(2, stat_shape, x.dtype());
    auto run = [&](auto tag) {
      using T = decltype(tag);
      Tensor scale_storage, bias_storage;
      const T* scale = expanded_param<T>(ctx, ctx.input(1), norm_shape, "Scale", scale_storage);
      const T* bias = nullptr;
      if (const Tensor* b = ctx.optional_input(2))
        bias = expanded_param<T>(ctx, *b, norm_shape, "B", bias_storage);
      if (rows == 0) return;
      layer_norm_kernel<T><<<cuda_reduce::grid_for(rows), cuda_reduce::row_threads(d), 0,
                             cuda_ew::stream_of(ctx)>>>(
          x.data<T>(), scale, bias, y.data<T>(), mean_out ? mean_out->data<T>() : nullptr,
          inv_out ? inv_out->data<T>() : nullptr, rows, d, static_cast<double>(epsilon_));
      cuda_ew::check_launch(ctx);
    };
    if (x.dtype() == DType::Float32)
      run(float{});
    else if (x.dtype() == DType::Float64)
      run(double{});
    else
      ctx.fail("input dtype ", dtype_name(x.dtype()), " is not supported on CUDA");
  }

 private:
  int64_t axis_;
  float epsilon_;
};

/// Declines nodes whose Scale or B is known to differ from X's dtype (the CPU kernel converts).
std::unique_ptr<OpKernel> make_layer_norm(const KernelInfo& info) {
  const auto& types = info.input_types;
  for (size_t i = 1; i < types.size() && i < 3; ++i)
    if (types[0] && types[i] && types[i]->dtype != types[0]->dtype) return nullptr;
  return std::make_unique<LayerNormCuda>(info);
}

DPRUN_REGISTER_KERNEL({.op_type = "LayerNormalization",
                       .since = 1,
                       .device = DeviceType::CUDA,
                       .dtypes = {DType::Float32, DType::Float64},
                       .factory = make_layer_norm});

}  // namespace
}  // namespace dprun
