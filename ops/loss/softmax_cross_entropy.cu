// The compute of the CUDA SoftmaxCrossEntropyLoss and NegativeLogLikelihoodLoss (defined in
// ops/loss/softmax_cross_entropy_cuda_def.cpp; float32 and float64), with the semantics of
// ops/loss/loss.cpp, so that a classifier's training step keeps its logits and loss on the GPU.
// NegativeLogLikelihoodLoss is the same computation on scores that already are log-probabilities
// (no shift, no log_prob output). Scores [N, C] or [N, C, d1, ..., dk] are viewed as [N, C, D];
// labels (int32 or int64) as [N, D]. As on the CPU: log-softmax over C in the scores' type;
// per-position loss -lp[n, label, d] * weight[label] in double (0 with weight 0 where label ==
// ignore_index); "sum" and "mean" add those in double, "mean" dividing by the sum of the weights
// used (0 / 0 = NaN when every position is ignored). Float16 and bfloat16 scores have no CUDA
// definition and run on the host.
//
// Labels outside [0, C) that are not ignore_index: the CPU kernel fails. Gather validates its
// indices on the host, which for indices computed on the device means a copy to the host and a
// wait for the stream; labels are fed anew at each training step, so that wait would stall
// every step. Here labels are validated on the host, with the CPU kernel's message, only when
// they are a constant of the plan (the cheap case Gather has too); otherwise such a position
// gets a NaN loss and a NaN weight, so "sum" and "mean" are NaN: no memory outside the scores
// is read and the bad label does not go unnoticed.
//
// Kernels, all on the run's stream: (1) the log-softmax shift (max + log sum exp) of each
// [n, :, d] column, one block per row when D == 1 and C is long, else one thread per column;
// log_prob, when wanted, is written there; (2) "none": one thread per position; "sum"/"mean": a
// grid whose size depends only on N * D writes per-block partial sums, one block adds them,
// both in a fixed order, so results are the same run to run (no atomics).
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <type_traits>

#include "ops/common/reduce_common.h"
#include "ops/cuda/defs/cuda_compute.h"
#include "ops/cuda/elementwise_layout.h"
#include "ops/cuda/reduce.cuh"
#include "ops/loss/loss_attributes.h"

namespace dprun {
namespace {

using cuda_reduce::block_reduce;

template <class T>
__device__ T exp_of(T v) {
  if constexpr (std::is_same_v<T, float>)
    return expf(v);
  else
    return exp(v);
}

template <class T>
__device__ T log_of(T v) {
  if constexpr (std::is_same_v<T, float>)
    return logf(v);
  else
    return log(v);
}

/// std::max(a, b) as the CPU kernel takes it: a NaN b leaves a.
struct MaxOp {
  template <class T>
  __device__ T operator()(T a, T b) const {
    return a < b ? b : a;
  }
};
struct SumOp {
  template <class T>
  __device__ T operator()(T a, T b) const {
    return a + b;
  }
};

/// D == 1: one block per row of C contiguous scores. shift[r] = max + log(sum exp(x - max));
/// lp (null when not wanted) gets x - shift.
template <class T>
__global__ void shift_rows_kernel(const T* x, T* shift, T* lp, int64_t rows, int64_t c) {
  __shared__ T scratch[cuda_reduce::kScratch];
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T* xr = x + r * c;
    T mx = -INFINITY;
    for (int64_t j = threadIdx.x; j < c; j += blockDim.x) mx = MaxOp{}(mx, xr[j]);
    mx = block_reduce(mx, T(-INFINITY), MaxOp{}, scratch);
    T sum = 0;
    for (int64_t j = threadIdx.x; j < c; j += blockDim.x) sum += exp_of(xr[j] - mx);
    sum = block_reduce(sum, T(0), SumOp{}, scratch);
    const T s = mx + log_of(sum);
    if (lp)
      for (int64_t j = threadIdx.x; j < c; j += blockDim.x) lp[r * c + j] = xr[j] - s;
    if (threadIdx.x == 0) shift[r] = s;
  }
}

/// One thread per [n, :, d] column of the [N, C, D] view (position t = n * D + d), walking C in
/// the CPU kernel's order; neighbouring threads read neighbouring addresses when D > 1.
template <class T>
__global__ void shift_columns_kernel(const T* x, T* shift, T* lp, int64_t positions, int64_t c,
                                     int64_t d) {
  for (int64_t t = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; t < positions;
       t += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t base = (t / d) * c * d + t % d;
    const T* xc = x + base;
    T mx = -INFINITY;
    for (int64_t k = 0; k < c; ++k) mx = MaxOp{}(mx, xc[k * d]);
    T sum = 0;
    for (int64_t k = 0; k < c; ++k) sum += exp_of(xc[k * d] - mx);
    const T s = mx + log_of(sum);
    if (lp)
      for (int64_t k = 0; k < c; ++k) lp[base + k * d] = xc[k * d] - s;
    shift[t] = s;
  }
}

template <class T, class L>
struct LossArgs {
  const T* x;
  const T* shift;
  const L* labels;
  const T* weight;  // null: every weight is 1
  int64_t c, d;
  bool has_ignore;
  int64_t ignore;
};

/// Loss and weight of position i, as the CPU's nll_core computes them; NaN and NaN for an
/// unchecked label outside [0, C) (see the header).
template <class T, class L>
__device__ void position_loss(const LossArgs<T, L>& a, int64_t i, double& loss, double& wt) {
  const auto t = static_cast<int64_t>(a.labels[i]);
  if (a.has_ignore && t == a.ignore) {
    loss = 0.0;
    wt = 0.0;
    return;
  }
  if (t < 0 || t >= a.c) {
    loss = NAN;
    wt = NAN;
    return;
  }
  const int64_t n = i / a.d, di = i % a.d;
  // Rounded to T as the CPU's lp is; NegativeLogLikelihoodLoss reads log-probabilities as given.
  const T x = a.x[(n * a.c + t) * a.d + di];
  const T lp = a.shift ? x - a.shift[i] : x;
  wt = a.weight ? static_cast<double>(a.weight[t]) : 1.0;
  // Rounded on its own: the CPU stores each loss before summing, so no fused multiply-add.
  loss = __dmul_rn(-static_cast<double>(lp), wt);
}

template <class T, class L>
__global__ void loss_none_kernel(LossArgs<T, L> a, T* out, int64_t positions) {
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < positions;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    double loss, wt;
    position_loss(a, i, loss, wt);
    out[i] = static_cast<T>(loss);
  }
}

/// partials[b] and partials[gridDim.x + b]: block b's sums of the losses and the weights.
template <class T, class L>
__global__ void loss_partials_kernel(LossArgs<T, L> a, int64_t positions, double* partials) {
  __shared__ double scratch[cuda_reduce::kScratch];
  double sum = 0.0, wsum = 0.0;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < positions;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    double loss, wt;
    position_loss(a, i, loss, wt);
    sum += loss;
    wsum += wt;
  }
  sum = block_reduce(sum, 0.0, SumOp{}, scratch);
  wsum = block_reduce(wsum, 0.0, SumOp{}, scratch);
  if (threadIdx.x == 0) {
    partials[blockIdx.x] = sum;
    partials[gridDim.x + blockIdx.x] = wsum;
  }
}

/// One block: out[0] = the sum of the losses, divided by the sum of the weights for "mean".
template <class T>
__global__ void loss_total_kernel(const double* partials, int64_t blocks, bool mean, T* out) {
  __shared__ double scratch[cuda_reduce::kScratch];
  double sum = 0.0, wsum = 0.0;
  for (int64_t j = threadIdx.x; j < blocks; j += blockDim.x) {
    sum += partials[j];
    wsum += partials[blocks + j];
  }
  sum = block_reduce(sum, 0.0, SumOp{}, scratch);
  wsum = block_reduce(wsum, 0.0, SumOp{}, scratch);
  if (threadIdx.x == 0) out[0] = static_cast<T>(mean ? sum / wsum : sum);
}

/// Rows shorter than this get a thread each: a block would mostly idle.
constexpr int64_t kMinBlockRow = 32;
constexpr int kThreads = 256;
/// Partial sums of "sum"/"mean": at most this many, so one block adds them.
constexpr int64_t kMaxPartials = cuda_reduce::kMaxThreads;

/// SoftmaxCrossEntropyLoss when kSoftmax, else NegativeLogLikelihoodLoss (scores are already
/// log-probabilities: no shift, no log_prob output).
template <bool kSoftmax>
class LossCuda : public OpKernel {
 public:
  explicit LossCuda(const KernelInfo& info) : attrs_(info.node) {
    if (auto it = info.constant_inputs.find(1); it != info.constant_inputs.end())
      constant_labels_ = it->second;
  }

  void compute(KernelContext& ctx) const override {
    const Tensor& x = ctx.input(0);
    const Tensor& target = ctx.input(1);
    const Tensor* weight = ctx.optional_input(2);
    int64_t n, c, d;
    loss_dims(ctx, x, target, weight, n, c, d);
    if (target.dtype() != DType::Int32 && target.dtype() != DType::Int64)
      ctx.fail("target must be int32 or int64, got ", dtype_name(target.dtype()));
    if (constant_labels_.defined()) check_labels(ctx, c);
    switch (x.dtype()) {
      case DType::Float32:
        return run<float>(ctx, x, target, weight, n, c, d);
      case DType::Float64:
        return run<double>(ctx, x, target, weight, n, c, d);
      default:
        ctx.fail("scores dtype ", dtype_name(x.dtype()), " is not supported on CUDA");
    }
  }

 private:
  /// The CPU kernel's label check, on the plan's host copy of constant labels.
  void check_labels(const KernelContext& ctx, int64_t c) const {
    for (int64_t t : read_int_list(ctx, constant_labels_, "target")) {
      if (attrs_.ignore_index && t == *attrs_.ignore_index) continue;
      if (t < 0 || t >= c) ctx.fail("target value ", t, " is outside [0, ", c, ")");
    }
  }

  template <class T>
  void run(KernelContext& ctx, const Tensor& x, const Tensor& target, const Tensor* weight,
           int64_t n, int64_t c, int64_t d) const {
    const cudaStream_t stream = cuda_ew::stream_of(ctx);
    const int64_t positions = n * d;
    T* lp = kSoftmax && ctx.output_wanted(1)
                ? ctx.allocate_output(1, x.shape(), x.dtype()).data<T>()
                : nullptr;
    Tensor shift;
    if (kSoftmax) shift = Tensor::empty({positions}, x.dtype(), ctx.device());
    if (kSoftmax && positions > 0) {
      if (d == 1 && c >= kMinBlockRow)
        shift_rows_kernel<T><<<cuda_reduce::grid_for(n), cuda_reduce::row_threads(c), 0, stream>>>(
            x.data<T>(), shift.data<T>(), lp, n, c);
      else
        shift_columns_kernel<T>
            <<<cuda_reduce::grid_for((positions + kThreads - 1) / kThreads), kThreads, 0, stream>>>(
                x.data<T>(), shift.data<T>(), lp, positions, c, d);
      cuda_ew::check_launch(ctx);
    }
    auto launch = [&](auto label_tag) {
      using L = decltype(label_tag);
      const LossArgs<T, L> args{.x = x.data<T>(),
                                .shift = kSoftmax ? shift.data<T>() : nullptr,
                                .labels = target.data<L>(),
                                .weight = weight ? weight->data<T>() : nullptr,
                                .c = c,
                                .d = d,
                                .has_ignore = attrs_.ignore_index.has_value(),
                                .ignore = attrs_.ignore_index.value_or(0)};
      if (attrs_.reduction == Reduction::None) {
        Tensor& out = ctx.allocate_output(0, target.shape(), x.dtype());
        if (positions == 0) return;
        loss_none_kernel<T, L>
            <<<cuda_reduce::grid_for((positions + kThreads - 1) / kThreads), kThreads, 0, stream>>>(
                args, out.data<T>(), positions);
        cuda_ew::check_launch(ctx);
        return;
      }
      Tensor& out = ctx.allocate_output(0, {}, x.dtype());
      // Depends on the size only, so the order of the additions is the same on every run.
      const int64_t blocks =
          std::clamp<int64_t>((positions + kThreads - 1) / kThreads, 1, kMaxPartials);
      Tensor partials = Tensor::empty({2 * blocks}, DType::Float64, ctx.device());
      loss_partials_kernel<T, L><<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(
          args, positions, partials.data<double>());
      cuda_ew::check_launch(ctx);
      loss_total_kernel<T><<<1, cuda_reduce::row_threads(blocks), 0, stream>>>(
          partials.data<double>(), blocks, attrs_.reduction == Reduction::Mean, out.data<T>());
      cuda_ew::check_launch(ctx);
    };
    if (target.dtype() == DType::Int32)
      launch(int32_t{});
    else
      launch(int64_t{});
  }

  LossAttrs attrs_;
  Tensor constant_labels_;  // the plan's host copy of constant labels, else undefined
};

DPRUN_CUDA_COMPUTE("SoftmaxCrossEntropyLoss", make_kernel<LossCuda<true>>);
DPRUN_CUDA_COMPUTE("NegativeLogLikelihoodLoss", make_kernel<LossCuda<false>>);

}  // namespace
}  // namespace dprun
