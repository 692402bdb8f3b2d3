// The compute of the CUDA LRN (float32; defined in ops/normalization/lrn_cuda_def.cpp) with cuDNN's
// cross-channel LRN, X [N, C, D1, ...] viewed as
// [N, C, D1 * D2 * ..., 1]. ONNX: Y = X / (bias + alpha / size * sum of X^2 over channels
// [c - floor((size-1)/2), c + ceil((size-1)/2)])^beta. cuDNN's lrnN, lrnAlpha, lrnBeta, lrnK
// take size, alpha, beta, bias as they are: cuDNN also divides alpha by the window size, and
// centres the window the same way (floor((n-1)/2) channels before, the rest after).
//
// Declined by the definition (host): parameters outside cuDNN's ranges (size above
// CUDNN_LRN_MAX_N = 16, bias below CUDNN_LRN_MIN_K, beta below CUDNN_LRN_MIN_BETA), and X known
// not to be float32; the limits it reads (defs/cudnn_limits.h) are checked here to be cuDNN's.
#include "engine/backends/cuda/cuda_check.h"
#include "engine/backends/cuda/cuda_execution_context.h"
#include "ops/cuda/cudnn_util.h"
#include "ops/cuda/defs/cuda_compute.h"
#include "ops/cuda/defs/cudnn_limits.h"

namespace dprun {
namespace {

static_assert(cudnn::kLrnMinN == CUDNN_LRN_MIN_N && cudnn::kLrnMaxN == CUDNN_LRN_MAX_N &&
                  cudnn::kLrnMinK == CUDNN_LRN_MIN_K && cudnn::kLrnMinBeta == CUDNN_LRN_MIN_BETA,
              "ops/cuda/defs/cudnn_limits.h: the LRN limits are not this cuDNN's");

class LrnDesc : public cudnn::Descriptor<cudnnLRNDescriptor_t, cudnnCreateLRNDescriptor,
                                         cudnnDestroyLRNDescriptor> {
 public:
  LrnDesc(unsigned size, double alpha, double beta, double k)
      : Descriptor("cudnnCreateLRNDescriptor") {
    cudnn_check(cudnnSetLRNDescriptor(*this, size, alpha, beta, k), "cudnnSetLRNDescriptor");
  }
};

class LrnCudnn : public OpKernel {
 public:
  explicit LrnCudnn(const KernelInfo& info)
      : alpha_(info.node.attr_float("alpha", 1e-4f)),
        beta_(info.node.attr_float("beta", 0.75f)),
        bias_(info.node.attr_float("bias", 1.0f)),
        size_(info.node.attr_int("size")) {}

  void compute(KernelContext& ctx) const override {
    const Tensor& x = ctx.input(0);
    if (x.dtype() != DType::Float32) ctx.fail("expects float32, got ", x.describe());
    if (x.rank() < 2)
      ctx.fail("input must have rank >= 2 ([N, C, ...]), got shape ", shape_to_string(x.shape()));
    Tensor& y = ctx.allocate_output(0, x.shape(), DType::Float32);
    if (y.numel() == 0) return;
    CudaExecutionContext& cuda = CudaExecutionContext::of(ctx.execution());
    const int64_t n = x.dim(0), c = x.dim(1);
    const cudnn::TensorDesc desc(ctx, {n, c, x.numel() / (n * c), 1});
    const LrnDesc lrn(static_cast<unsigned>(size_), alpha_, beta_, bias_);
    const float one = 1.f, zero = 0.f;
    cudnn_check(cudnnLRNCrossChannelForward(cuda.cudnn(), lrn, CUDNN_LRN_CROSS_CHANNEL_DIM1, &one,
                                            desc, x.data<float>(), &zero, desc, y.data<float>()),
                "LRN: cudnnLRNCrossChannelForward of [", shape_to_string(x.shape()), "]");
  }

 private:
  double alpha_, beta_, bias_;
  int64_t size_;
};

DPRUN_CUDA_COMPUTE("LRN", make_kernel<LrnCudnn>);

}  // namespace
}  // namespace dprun
