// The compute of the CUDA BatchNormalization in training mode (X float32 or float64; defined
// in ops/normalization/batch_norm_training_cuda_def.cpp), with the semantics of
// ops/normalization/batch_norm.cpp, so that a CNN's training step keeps its activations on the GPU
// (the cuDNN kernel, ops/normalization/batch_norm_cuda.cpp, runs inference only and declines these
// nodes).
//
// Accepted by the definition: the nodes the CPU kernel runs in training mode (batch_norm_training:
// training_mode=1 from opset 14; before it, a node naming more than one output), except spatial=0
// before opset 9 (per-activation parameters) and parameters known to be other than float32/float64;
// those run on the host. scale/B and mean/var may each be float32 or float64, whatever X is.
//
// X [N, C, D1, ...] is seen as [N, C, S]. One block per channel takes the batch mean and the
// population variance over its N * S elements in double (two passes, as on the CPU), then
// folds them with scale and B into y = x * a[c] + b[c] computed in double and rounded to X's
// type, as the CPU does; the channel's thread 0 also writes the requested statistics outputs
// (running = input * momentum + batch * (1 - momentum); before opset 14 also the batch mean
// and variance as saved_mean and saved_var) in the dtypes of the mean and var inputs. An
// elementwise kernel then applies the affine map. Each multiply and add is rounded on its own
// (no fused multiply-add, which the host's x86-64 baseline build does not have either), so
// that given equal statistics the GPU's a, b and y are the CPU's bit for bit; only the order
// in which the sums are taken differs. Block sums have a fixed tree: runs are deterministic.
#include <cuda_runtime_api.h>

#include <cmath>
#include <cstdint>

#include "ops/cuda/defs/cuda_compute.h"
#include "ops/cuda/elementwise.cuh"
#include "ops/cuda/reduce.cuh"
#include "ops/normalization/batch_norm_affine.cuh"
#include "ops/normalization/batch_norm_channel.cuh"
#include "ops/normalization/batch_norm_checks.h"

namespace dprun {
namespace {

using cuda_bn::DoubleSum;
using cuda_bn::for_channel_elements;
using cuda_reduce::block_reduce;

/// A per-channel parameter input (scale, B, mean, var) of float32 or float64.
struct ParamIn {
  const void* data;
  bool f64;
  __device__ double load(int64_t c) const {
    return f64 ? static_cast<const double*>(data)[c]
               : static_cast<double>(static_cast<const float*>(data)[c]);
  }
};

/// A per-channel statistics output of float32 or float64; data is null when not produced.
struct StatOut {
  void* data = nullptr;
  bool f64 = false;
  __device__ void store(int64_t c, double v) const {
    if (data == nullptr) return;
    if (f64)
      static_cast<double*>(data)[c] = v;
    else
      static_cast<float*>(data)[c] = static_cast<float>(v);
  }
};

struct ChannelArgs {
  ParamIn scale, bias, mean, var;  // inputs 1-4
  StatOut outputs[4];              // outputs 1-4: running mean and var, saved mean and var
};

/// One block per channel: batch statistics, the affine map (a, b) and the statistics outputs.
template <class T>
__global__ void channel_stats_kernel(const T* x, int64_t N, int64_t C, int64_t S, double epsilon,
                                     double momentum, ChannelArgs p, T* a, T* b) {
  __shared__ double scratch[cuda_reduce::kScratch];
  const int64_t count = N * S;
  for (int64_t c = blockIdx.x; c < C; c += gridDim.x) {
    const T* xc = x + c * S;
    double sum = 0.0;
    for_channel_elements(N, C, S, [&](int64_t i) { sum += static_cast<double>(xc[i]); });
    sum = block_reduce(sum, 0.0, DoubleSum{}, scratch);
    const double mean = count ? sum / static_cast<double>(count) : 0.0;
    double sq = 0.0;
    for_channel_elements(N, C, S, [&](int64_t i) {
      const double d = static_cast<double>(xc[i]) - mean;
      sq += d * d;
    });
    sq = block_reduce(sq, 0.0, DoubleSum{}, scratch);
    if (threadIdx.x == 0) {
      const double var = count ? sq / static_cast<double>(count) : 0.0;
      const double ap = p.scale.load(c) / sqrt(var + epsilon);
      a[c] = static_cast<T>(ap);
      b[c] = static_cast<T>(__dsub_rn(p.bias.load(c), __dmul_rn(mean, ap)));
      // The inputs are read before the outputs are written: an output may share their memory.
      const double in_mean = p.mean.load(c), in_var = p.var.load(c);
      p.outputs[0].store(c, __dadd_rn(__dmul_rn(in_mean, momentum), __dmul_rn(mean, 1 - momentum)));
      p.outputs[1].store(c, __dadd_rn(__dmul_rn(in_var, momentum), __dmul_rn(var, 1 - momentum)));
      p.outputs[2].store(c, mean);
      p.outputs[3].store(c, var);
    }
  }
}

bool float32_or_64(DType t) {
  return t == DType::Float32 || t == DType::Float64;
}

class BatchNormTrainingCuda : public OpKernel {
 public:
  explicit BatchNormTrainingCuda(const KernelInfo& info)
      : epsilon_(info.node.attr_float("epsilon", 1e-5f)),
        momentum_(info.node.attr_float("momentum", 0.9f)) {}

  void compute(KernelContext& ctx) const override {
    const Tensor& x = ctx.input(0);
    const BatchNormDims dims = batch_norm_dims(ctx, x);
    check_batch_norm_params(ctx, dims.c, x.shape());
    Tensor& y = ctx.allocate_output(0, x.shape(), x.dtype());
    switch (x.dtype()) {
      case DType::Float32:
        return run<float>(ctx, x, y, dims);
      case DType::Float64:
        return run<double>(ctx, x, y, dims);
      default:
        ctx.fail("input dtype ", dtype_name(x.dtype()), " is not supported on CUDA");
    }
  }

 private:
  static ParamIn param(const KernelContext& ctx, size_t input, const char* what) {
    const Tensor& t = ctx.input(input);
    if (!float32_or_64(t.dtype()))
      ctx.fail(what, " must be float32 or float64 on CUDA, got ", t.describe());
    return {t.raw_data(), t.dtype() == DType::Float64};
  }

  template <class T>
  void run(KernelContext& ctx, const Tensor& x, Tensor& y, const BatchNormDims& d) const {
    ChannelArgs p{.scale = param(ctx, 1, "scale"),
                  .bias = param(ctx, 2, "B"),
                  .mean = param(ctx, 3, "mean"),
                  .var = param(ctx, 4, "var")};
    // As on the CPU: outputs 1 and 3 like the mean input, 2 and 4 like var; only those the
    // node asks for and something reads are made.
    for (size_t o = 1; o <= 4; ++o) {
      if (ctx.output_count() <= o || !ctx.output_wanted(o)) continue;
      const Tensor& like = ctx.input(o % 2 == 1 ? 3 : 4);
      Tensor& out = ctx.allocate_output(o, like.shape(), like.dtype());
      p.outputs[o - 1] = {out.raw_data(), like.dtype() == DType::Float64};
    }
    if (d.c == 0) return;
    const cudaStream_t stream = cuda_ew::stream_of(ctx);
    Tensor affine = Tensor::empty({2 * d.c}, x.dtype(), ctx.device());
    T* a = affine.data<T>();
    T* b = a + d.c;
    channel_stats_kernel<T>
        <<<cuda_reduce::grid_for(d.c), cuda_reduce::row_threads(d.n * d.s), 0, stream>>>(
            x.data<T>(), d.n, d.c, d.s, static_cast<double>(epsilon_),
            static_cast<double>(momentum_), p, a, b);
    cuda_ew::check_launch(ctx);
    cuda_bn::apply_affine(ctx, x.data<T>(), y.data<T>(), a, b, x.numel(), d.s, d.c);
  }

  float epsilon_;
  float momentum_;
};

DPRUN_CUDA_COMPUTE("BatchNormalization/training", make_kernel<BatchNormTrainingCuda>);

}  // namespace
}  // namespace dprun
