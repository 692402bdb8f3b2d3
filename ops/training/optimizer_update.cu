// The compute of the optimizers' update kernels on CUDA GPUs (engine/training/optimizer_update.h;
// defined in ops/training/optimizer_update_cuda_def.cpp, which declines nodes in a graph): one
// grid-stride kernel per update running the ops/math functors that the CPU loops run; the loss
// scaler's and gradient clipping's scale, the gradient norm in two deterministic passes, and the
// sum of accumulated gradients.
// Compiled without fused multiply-add (ops/CMakeLists.txt), so each element's update rounds as the
// host's does.
#include <cuda_runtime_api.h>

#include <algorithm>

#include "engine/backends/cuda/cuda_check.h"
#include "engine/backends/cuda/cuda_execution_context.h"
#include "engine/training/optimizer_update.h"
#include "ops/cuda/defs/cuda_compute.h"
#include "ops/cuda/elementwise.cuh"
#include "ops/math/optimizer_functors.h"

namespace dprun {
namespace {

using cuda_ew::blocks_for;
using cuda_ew::kThreads;

template <class T, class Op>
__global__ void sgd_kernel(Op op, T* __restrict__ p, const T* __restrict__ g, T* __restrict__ buf,
                           int64_t n) {
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    if constexpr (Op::kUsesMomentum) {
      p[i] = op(p[i], g[i], buf[i]);
    } else {
      T unused{};
      p[i] = op(p[i], g[i], unused);
    }
  }
}

template <class T, class Op>
__global__ void adam_kernel(Op op, T* __restrict__ p, const T* __restrict__ g, T* __restrict__ m,
                            T* __restrict__ v, int64_t n) {
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    p[i] = op(p[i], g[i], m[i], v[i]);
}

// Multiplies g by factor; sets *found_inf to 1 when an element was not finite. Threads that
// find one all write the same value, so the race is benign.
template <class T>
__global__ void scale_kernel(T factor, T* __restrict__ g, float* __restrict__ found_inf,
                             int64_t n) {
  bool finite = true;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const T v = g[i];
    finite = finite && isfinite(v);
    g[i] = v * factor;
  }
  if (!finite) *found_inf = 1.0f;
}

template <class T>
__global__ void add_kernel(T* __restrict__ sum, const T* __restrict__ more, int64_t n) {
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    sum[i] += more[i];
}

// The blocks of a gradient norm's first pass: few enough for one thread to fold their partials.
constexpr int64_t kNormBlocks = 1024;

// max(a, b) where a NaN wins, as the host loop keeps one.
__device__ double max_or_nan(double a, double b) {
  return isnan(a) || isnan(b) ? nan("") : fmax(a, b);
}

// Pass 1 of a gradient norm: each block's sum of squares (or largest absolute value) of its
// grid-stride share of g, folded in a fixed tree order, into partials[block].
template <class T>
__global__ void norm_partials_kernel(const T* __restrict__ g, int64_t n, bool infinity,
                                     double* __restrict__ partials) {
  __shared__ double folded[kThreads];
  double acc = 0;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const double v = static_cast<double>(g[i]);
    acc = infinity ? max_or_nan(acc, fabs(v)) : acc + v * v;
  }
  folded[threadIdx.x] = acc;
  __syncthreads();
  for (unsigned half = blockDim.x / 2; half > 0; half /= 2) {
    if (threadIdx.x < half) {
      const double other = folded[threadIdx.x + half];
      folded[threadIdx.x] =
          infinity ? max_or_nan(folded[threadIdx.x], other) : folded[threadIdx.x] + other;
    }
    __syncthreads();
  }
  if (threadIdx.x == 0) partials[blockIdx.x] = folded[0];
}

// Pass 2: one thread folds the blocks' partials in block order into *out.
__global__ void norm_finish_kernel(const double* __restrict__ partials, unsigned blocks,
                                   bool infinity, double* __restrict__ out) {
  double acc = 0;
  for (unsigned b = 0; b < blocks; ++b)
    acc = infinity ? max_or_nan(acc, partials[b]) : acc + partials[b];
  *out = acc;
}

// The stream of `execution`, which must be a CUDA context on the parameter's GPU.
cudaStream_t stream_for(ExecutionContext* execution, const Tensor& parameter, const char* op) {
  DPRUN_CHECK(execution != nullptr, op, " on ", parameter.device().to_string(),
              ": a GPU update needs the execution context whose stream it is queued on");
  CudaExecutionContext& cuda = CudaExecutionContext::of(*execution);
  DPRUN_CHECK(cuda.device() == parameter.device(), op, ": the parameter is on ",
              parameter.device().to_string(), " but the stream on ", cuda.device().to_string());
  return cuda.stream();
}

class CudaSgdUpdate final : public SgdUpdateKernel {
 public:
  void update(ExecutionContext* execution, const SgdOptions& o, bool first, Tensor& parameter,
              const Tensor& gradient, Tensor& momentum_buffer, int64_t begin,
              int64_t end) const override {
    cudaStream_t stream = stream_for(execution, parameter, kSgdUpdateOp);
    const int64_t n = end - begin;
    if (n <= 0) return;
    visit_dtype_among<float, double>(parameter.dtype(), [&](auto tag) {
      using T = decltype(tag);
      T* buf = o.momentum != 0 ? momentum_buffer.data<T>() + begin : nullptr;
      math::with_sgd_update<T>(
          o.lr, o.momentum, o.dampening, o.weight_decay, o.nesterov, first, [&](auto op) {
            sgd_kernel<<<blocks_for(n), kThreads, 0, stream>>>(op, parameter.data<T>() + begin,
                                                               gradient.data<T>() + begin, buf, n);
          });
    });
    cuda_check(cudaGetLastError(), kSgdUpdateOp, " on ", parameter.device().to_string(),
               ": kernel launch");
  }
};

class CudaAdamUpdate final : public AdamUpdateKernel {
 public:
  void update(ExecutionContext* execution, const AdamOptions& o, int64_t step, Tensor& parameter,
              const Tensor& gradient, Tensor& exp_avg, Tensor& exp_avg_sq, int64_t begin,
              int64_t end) const override {
    cudaStream_t stream = stream_for(execution, parameter, kAdamUpdateOp);
    const int64_t n = end - begin;
    if (n <= 0) return;
    visit_dtype_among<float, double>(parameter.dtype(), [&](auto tag) {
      using T = decltype(tag);
      math::with_adam_update<T>(o.lr, o.beta1, o.beta2, o.eps, o.weight_decay,
                                o.decoupled_weight_decay, step, [&](auto op) {
                                  adam_kernel<<<blocks_for(n), kThreads, 0, stream>>>(
                                      op, parameter.data<T>() + begin, gradient.data<T>() + begin,
                                      exp_avg.data<T>() + begin, exp_avg_sq.data<T>() + begin, n);
                                });
    });
    cuda_check(cudaGetLastError(), kAdamUpdateOp, " on ", parameter.device().to_string(),
               ": kernel launch");
  }
};

class CudaScaleGradient final : public GradientScaleKernel {
 public:
  void scale(ExecutionContext* execution, double factor, Tensor& gradient,
             Tensor& found_inf) const override {
    cudaStream_t stream = stream_for(execution, gradient, kScaleGradientOp);
    DPRUN_CHECK(found_inf.device() == gradient.device() && found_inf.dtype() == DType::Float32,
                kScaleGradientOp, ": the flag is ", found_inf.describe(), ", not float32 on ",
                gradient.device().to_string());
    const int64_t n = gradient.numel();
    if (n == 0) return;
    visit_dtype_among<float, double>(gradient.dtype(), [&](auto tag) {
      using T = decltype(tag);
      scale_kernel<<<blocks_for(n), kThreads, 0, stream>>>(
          static_cast<T>(factor), gradient.data<T>(), found_inf.data<float>(), n);
    });
    cuda_check(cudaGetLastError(), kScaleGradientOp, " on ", gradient.device().to_string(),
               ": kernel launch");
  }
};

class CudaGradientNorm final : public GradientNormKernel {
 public:
  void norm(ExecutionContext* execution, const Tensor& gradient, bool infinity, Tensor& out,
            int64_t slot) const override {
    cudaStream_t stream = stream_for(execution, gradient, kGradientNormOp);
    DPRUN_CHECK(out.device() == gradient.device() && out.dtype() == DType::Float64 && slot >= 0 &&
                    slot < out.numel(),
                kGradientNormOp, ": slot ", slot, " of ", out.describe(), " for a gradient on ",
                gradient.device().to_string());
    const int64_t n = gradient.numel();
    const auto blocks =
        static_cast<unsigned>(std::clamp<int64_t>((n + kThreads - 1) / kThreads, 1, kNormBlocks));
    Tensor partials = Tensor::empty({blocks}, DType::Float64, gradient.device());
    visit_dtype_among<float, double>(gradient.dtype(), [&](auto tag) {
      using T = decltype(tag);
      norm_partials_kernel<T><<<blocks, kThreads, 0, stream>>>(gradient.data<T>(), n, infinity,
                                                               partials.data<double>());
    });
    norm_finish_kernel<<<1, 1, 0, stream>>>(partials.data<double>(), blocks, infinity,
                                            out.data<double>() + slot);
    cuda_check(cudaGetLastError(), kGradientNormOp, " on ", gradient.device().to_string(),
               ": kernel launch");
  }
};

class CudaAddGradient final : public GradientAddKernel {
 public:
  void add(ExecutionContext* execution, Tensor& sum, const Tensor& more) const override {
    cudaStream_t stream = stream_for(execution, sum, kAddGradientOp);
    DPRUN_CHECK(
        more.device() == sum.device() && more.dtype() == sum.dtype() && more.numel() == sum.numel(),
        kAddGradientOp, ": adding ", more.describe(), " to ", sum.describe());
    const int64_t n = sum.numel();
    if (n == 0) return;
    visit_dtype_among<float, double>(sum.dtype(), [&](auto tag) {
      using T = decltype(tag);
      add_kernel<<<blocks_for(n), kThreads, 0, stream>>>(sum.data<T>(), more.data<T>(), n);
    });
    cuda_check(cudaGetLastError(), kAddGradientOp, " on ", sum.device().to_string(),
               ": kernel launch");
  }
};

/// Builds an update kernel; its definition has declined nodes in a graph.
template <class K>
std::unique_ptr<OpKernel> make_update(const KernelInfo&) {
  return std::make_unique<K>();
}

DPRUN_CUDA_COMPUTE("ai.dprun::SgdUpdate", make_update<CudaSgdUpdate>);
DPRUN_CUDA_COMPUTE("ai.dprun::AdamUpdate", make_update<CudaAdamUpdate>);
DPRUN_CUDA_COMPUTE("ai.dprun::ScaleGradient", make_update<CudaScaleGradient>);
DPRUN_CUDA_COMPUTE("ai.dprun::GradientNorm", make_update<CudaGradientNorm>);
DPRUN_CUDA_COMPUTE("ai.dprun::AddGradient", make_update<CudaAddGradient>);

}  // namespace
}  // namespace dprun
