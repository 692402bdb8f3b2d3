// The compute of the CUDA BatchNormalization inference in float16 and bfloat16 (defined in
// ops/normalization/batch_norm_16bit_cuda_def.cpp), bit for bit the CPU kernel's
// (ops/normalization/batch_norm.cpp): per channel a = scale / sqrt(var + epsilon) and b = B - mean
// * a in double, both rounded to float; then y = x * a + b in float, each step rounded on its own
// (no fused multiply-add, which the CPU's loop does not have either), rounded once to X's type.
// cuDNN's batch normalization takes 16-bit X only with float32 parameters, and ONNX gives a
// 16-bit node 16-bit ones.
//
// Declined by the definition (the node runs on the host), as by the float32 kernel: training
// mode, spatial=0 before opset 9, and parameters known to differ from X's dtype.
#include <cuda_runtime_api.h>

#include "ops/cuda/defs/cuda_compute.h"
#include "ops/cuda/elementwise.cuh"
#include "ops/cuda/half_convert.cuh"
#include "ops/input_dtypes.h"
#include "ops/normalization/batch_norm_affine.cuh"
#include "ops/normalization/batch_norm_checks.h"

namespace dprun {
namespace {

using cuda_half::load;

/// a[k] and b[k] for each of the c channels (one thread each), in double as on the CPU.
template <class T>
__global__ void batch_norm_affine_kernel(const T* scale, const T* bias, const T* mean, const T* var,
                                         double epsilon, float* a, float* b, int64_t c) {
  for (int64_t k = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; k < c;
       k += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const double ak = __ddiv_rn(static_cast<double>(load(scale[k])),
                                sqrt(__dadd_rn(static_cast<double>(load(var[k])), epsilon)));
    a[k] = static_cast<float>(ak);
    b[k] = static_cast<float>(__dsub_rn(static_cast<double>(load(bias[k])),
                                        __dmul_rn(static_cast<double>(load(mean[k])), ak)));
  }
}

class BatchNorm16BitCuda : public OpKernel {
 public:
  explicit BatchNorm16BitCuda(const KernelInfo& info)
      : epsilon_(info.node.attr_float("epsilon", 1e-5f)) {}

  void compute(KernelContext& ctx) const override {
    const Tensor& x = ctx.input(0);
    if (x.dtype() == DType::Float16) return run<Float16>(ctx, x);
    if (x.dtype() == DType::BFloat16) return run<BFloat16>(ctx, x);
    ctx.fail("expects float16 or bfloat16 X, got ", x.describe());
  }

 private:
  template <class T>
  void run(KernelContext& ctx, const Tensor& x) const {
    const BatchNormDims dims = batch_norm_dims(ctx, x);
    const int64_t c = dims.c;
    check_batch_norm_params(ctx, c, x.shape());
    check_one_dtype(ctx, "X, scale, B, mean and var", 5);
    Tensor& y = ctx.allocate_output(0, x.shape(), x.dtype());
    if (y.numel() == 0) return;
    Tensor affine = Tensor::empty({2 * c}, DType::Float32, ctx.device());
    float* a = affine.data<float>();
    const cudaStream_t stream = cuda_ew::stream_of(ctx);
    batch_norm_affine_kernel<T><<<cuda_ew::blocks_for(c), cuda_ew::kThreads, 0, stream>>>(
        ctx.input(1).data<T>(), ctx.input(2).data<T>(), ctx.input(3).data<T>(),
        ctx.input(4).data<T>(), static_cast<double>(epsilon_), a, a + c, c);
    cuda_ew::check_launch(ctx);
    cuda_bn::apply_affine(ctx, x.data<T>(), y.data<T>(), a, a + c, y.numel(), dims.s, c);
  }

  float epsilon_;
};

DPRUN_CUDA_COMPUTE("BatchNormalization/16bit", make_kernel<BatchNorm16BitCuda>);

}  // namespace
}  // namespace dprun
