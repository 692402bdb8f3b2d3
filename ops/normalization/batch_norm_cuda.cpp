// The compute of the CUDA BatchNormalization inference in float32 (defined in
// ops/normalization/batch_norm_cuda_def.cpp) with cuDNN's spatial batch normalization:
// Y = (X - mean) / sqrt(var + epsilon) * scale + B per channel of X [N, C, D1, ...], X viewed
// as [N, C, D1 * D2 * ..., 1] (cuDNN wants 4-D; spatial BN does not care how the rest is
// shaped).
//
// Declined by the definition (the node runs on the host, where the CPU kernel has every mode):
// training (training_mode=1 from opset 14; before it, a node naming more than its first
// output), spatial=0 before opset 9 (per-activation parameters), epsilon below
// CUDNN_BN_MIN_EPSILON, and X or parameters known not to be float32.
#include "engine/backends/cuda/cuda_check.h"
#include "engine/backends/cuda/cuda_execution_context.h"
#include "ops/cuda/cudnn_util.h"
#include "ops/cuda/defs/cuda_compute.h"
#include "ops/cuda/defs/cudnn_limits.h"

namespace dprun {
namespace {

static_assert(cudnn::kBnMinEpsilon == CUDNN_BN_MIN_EPSILON,
              "ops/cuda/defs/cudnn_limits.h: kBnMinEpsilon is not this cuDNN's");

class BatchNormCudnn : public OpKernel {
 public:
  explicit BatchNormCudnn(const KernelInfo& info)
      : epsilon_(info.node.attr_float("epsilon", 1e-5f)) {}

  void compute(KernelContext& ctx) const override {
    const Tensor& x = ctx.input(0);
    if (x.dtype() != DType::Float32) ctx.fail("expects float32 X, got ", x.describe());
    if (x.rank() < 2)
      ctx.fail("X must have rank >= 2 ([N, C, ...]), got shape ", shape_to_string(x.shape()));
    const int64_t n = x.dim(0), c = x.dim(1);
    const char* names[] = {"scale", "B", "mean", "var"};
    for (size_t i = 1; i <= 4; ++i) {
      const Tensor& p = ctx.input(i);
      if (p.dtype() != DType::Float32 || p.numel() != c)
        ctx.fail(names[i - 1], " must be float32 with ", c, " values, got ", p.describe());
    }
    Tensor& y = ctx.allocate_output(0, x.shape(), DType::Float32);
    if (y.numel() == 0) return;
    CudaExecutionContext& cuda = CudaExecutionContext::of(ctx.execution());
    const cudnn::TensorDesc x_desc(ctx, {n, c, x.numel() / (n * c), 1}),
        param_desc(ctx, {1, c, 1, 1});
    const float one = 1.f, zero = 0.f;
    cudnn_check(
        cudnnBatchNormalizationForwardInference(
            cuda.cudnn(), CUDNN_BATCHNORM_SPATIAL, &one, &zero, x_desc, x.data<float>(), x_desc,
            y.data<float>(), param_desc, ctx.input(1).data<float>(), ctx.input(2).data<float>(),
            ctx.input(3).data<float>(), ctx.input(4).data<float>(), static_cast<double>(epsilon_)),
        "BatchNormalization: cudnnBatchNormalizationForwardInference of [",
        shape_to_string(x.shape()), "]");
  }

 private:
  float epsilon_;
};

DPRUN_CUDA_COMPUTE("BatchNormalization/cudnn", make_kernel<BatchNormCudnn>);

}  // namespace
}  // namespace dprun
