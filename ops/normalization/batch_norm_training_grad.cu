// The compute of the CUDA BatchNormTrainingGrad (rewrite domain, float32; defined in
// ops/normalization/batch_norm_training_grad_cuda_def.cpp): the gradient of a training-mode
// BatchNormalization in the fused form the CPU runs
// (ops/normalization/batch_norm_training_grad.cpp; the node's contract:
// engine/rewrites/op_fusion.h), with the same arithmetic. One block per channel of X [N, C, S]
// takes the mean in double, then sum((X - mean)^2), sum(dY) and sum(dY * (X - mean)) in double
// (block sums of a fixed tree: runs repeat bit for bit), and writes the channel's two sums and the
// coefficients of dX = a * dY + b * (X - mean) + c; an elementwise kernel then writes dX.
#include <cuda_runtime_api.h>

#include <cmath>
#include <cstdint>

#include "ops/cuda/defs/cuda_compute.h"
#include "ops/cuda/elementwise.cuh"
#include "ops/cuda/reduce.cuh"
#include "ops/normalization/batch_norm_channel.cuh"
#include "ops/normalization/batch_norm_training_grad_util.h"

namespace dprun {
namespace {

using cuda_bn::DoubleSum;
using cuda_bn::for_channel_elements;
using cuda_reduce::block_reduce;

/// Per channel: the mean X is centred on and the coefficients of dX.
struct Coefficients {
  float* mean;
  float* a;
  float* b;
  float* c;
};

__global__ void channel_sums_kernel(const float* x, const float* dy, const float* scale, int64_t N,
                                    int64_t C, int64_t S, double epsilon, float* dscale_sum,
                                    float* dbias_sum, Coefficients k) {
  __shared__ double scratch[cuda_reduce::kScratch];
  const double count = static_cast<double>(N * S);
  for (int64_t c = blockIdx.x; c < C; c += gridDim.x) {
    const float* xc = x + c * S;
    const float* gc = dy + c * S;
    double sum = 0.0;
    for_channel_elements(N, C, S, [&](int64_t i) { sum += static_cast<double>(xc[i]); });
    sum = block_reduce(sum, 0.0, DoubleSum{}, scratch);
    const float mean = count > 0 ? static_cast<float>(sum / count) : 0.0f;
    double sq = 0.0, g_sum = 0.0, gd_sum = 0.0;
    for_channel_elements(N, C, S, [&](int64_t i) {
      const double d = static_cast<double>(__fsub_rn(xc[i], mean));
      const double g = static_cast<double>(gc[i]);
      sq += d * d;
      g_sum += g;
      gd_sum += g * d;
    });
    sq = block_reduce(sq, 0.0, DoubleSum{}, scratch);
    g_sum = block_reduce(g_sum, 0.0, DoubleSum{}, scratch);
    gd_sum = block_reduce(gd_sum, 0.0, DoubleSum{}, scratch);
    if (threadIdx.x != 0) continue;
    if (count == 0) {
      dscale_sum[c] = dbias_sum[c] = 0.0f;
      k.mean[c] = k.a[c] = k.b[c] = k.c[c] = 0.0f;
      continue;
    }
    const double inv = 1.0 / sqrt(sq / count + epsilon);
    const double gx_sum = gd_sum * inv;  // sum(dY * xhat)
    const double a = static_cast<double>(scale[c]) * inv;
    dscale_sum[c] = static_cast<float>(gx_sum);
    dbias_sum[c] = static_cast<float>(g_sum);
    k.mean[c] = mean;
    k.a[c] = static_cast<float>(a);
    k.b[c] = static_cast<float>(-a * inv * gx_sum / count);
    k.c[c] = static_cast<float>(-a * g_sum / count);
  }
}

__global__ void input_gradient_kernel(const float* __restrict__ x, const float* __restrict__ dy,
                                      float* __restrict__ dx, int64_t n, int64_t S, int64_t C,
                                      Coefficients k) {
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t c = i / S % C;
    dx[i] = k.a[c] * dy[i] + k.b[c] * (x[i] - k.mean[c]) + k.c[c];
  }
}

class BatchNormTrainingGradCuda : public OpKernel {
 public:
  explicit BatchNormTrainingGradCuda(const KernelInfo& info)
      : epsilon_(info.node.attr_float("epsilon", 1e-5f)) {}

  void compute(KernelContext& ctx) const override {
    const Tensor& x = ctx.input(0);
    const Tensor& dy = ctx.input(1);
    const BatchNormGradTensors t = batch_norm_grad_tensors(ctx);
    const int64_t N = t.n, C = t.c, S = t.s;
    if (C == 0) return;
    const cudaStream_t stream = cuda_ew::stream_of(ctx);
    Tensor coefficients = Tensor::empty({4 * C}, DType::Float32, ctx.device());
    float* base = coefficients.data<float>();
    const Coefficients k{base, base + C, base + 2 * C, base + 3 * C};
    channel_sums_kernel<<<cuda_reduce::grid_for(C), cuda_reduce::row_threads(N * S), 0, stream>>>(
        x.data<float>(), dy.data<float>(), ctx.input(2).data<float>(), N, C, S,
        static_cast<double>(epsilon_), t.dscale_sum->data<float>(), t.dbias_sum->data<float>(), k);
    cuda_ew::check_launch(ctx);
    const int64_t n = x.numel();
    if (n == 0) return;
    input_gradient_kernel<<<cuda_ew::blocks_for(n), cuda_ew::kThreads, 0, stream>>>(
        x.data<float>(), dy.data<float>(), t.dx->data<float>(), n, S, C, k);
    cuda_ew::check_launch(ctx);
  }

 private:
  float epsilon_;
};

DPRUN_CUDA_COMPUTE("dprun::BatchNormTrainingGrad", make_kernel<BatchNormTrainingGradCuda>);

}  // namespace
}  // namespace dprun
