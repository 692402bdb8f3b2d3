#include "cuda/cuda_test_kernels.h"

#include "engine/backends/cuda/cuda_check.h"
#include "engine/backends/cuda/cuda_execution_context.h"
#include "engine/kernel.h"

namespace dprun::testing {

namespace {
__global__ void add_one_kernel(const float* in, float* out, int64_t n) {
  int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) out[i] = in[i] + 1.0f;
}

void launch_add_one(const float* in, float* out, int64_t n, cudaStream_t stream) {
  if (n == 0) return;
  constexpr int kThreads = 256;
  const auto blocks = static_cast<unsigned>((n + kThreads - 1) / kThreads);
  add_one_kernel<<<blocks, kThreads, 0, stream>>>(in, out, n);
  cuda_check(cudaGetLastError(), "add_one_kernel launch");
}

/// y = x + 1 on the run's stream: the way a CUDA kernel reaches its stream.
class AddOneCuda : public OpKernel {
 public:
  explicit AddOneCuda(const KernelInfo&) {}
  void compute(KernelContext& ctx) const override {
    const Tensor& x = ctx.input(0);
    if (x.dtype() != DType::Float32) ctx.fail("expects float32, got ", x.describe());
    Tensor& y = ctx.allocate_output(0, x.shape(), DType::Float32);
    CudaExecutionContext& cuda = CudaExecutionContext::of(ctx.execution());
    launch_add_one(x.data<float>(), y.data<float>(), x.numel(), cuda.stream());
  }
};

DPRUN_REGISTER_KERNEL({.domain = "dprun.test",
                       .op_type = "AddOne",
                       .device = DeviceType::CUDA,
                       .factory = make_kernel<AddOneCuda>});
}  // namespace

void add_one_on_stream(float* data, int64_t n, cudaStream_t stream) {
  launch_add_one(data, data, n, stream);
}

}  // namespace dprun::testing
