// The compute of PRelu on CUDA (defined in ops/elementwise/prelu_cuda_def.cpp; float32/64 and the
// signed integers, as the CPU's Types::Signed without the 16-bit floats): the CPU kernel's slope
// handling (ops/elementwise/prelu.h) and functor (math::PRelu), with the slope broadcast
// numpy-style by the binary elementwise kernel.
#include "ops/cuda/elementwise.cuh"
#include "ops/elementwise/prelu.h"
#include "ops/math/binary_functors.h"

namespace dprun::cuda_ew {
namespace {

class PReluCuda : public OpKernel {
 public:
  using Types = SignedTypes;
  explicit PReluCuda(const KernelInfo& info) : legacy_(info.opset < 7) {}

  void compute(KernelContext& ctx) const override {
    const Tensor& x = ctx.input(0);
    const Tensor slope = prelu_slope(ctx, x, ctx.input(1), legacy_);
    // The slope broadcasts to X, so the planned output shape is X's.
    const Layout<2> layout = binary_layout(ctx, x.shape(), slope.shape(), false);
    Tensor& y = ctx.allocate_output(0, x.shape(), x.dtype());
    dispatch(Types{}, x.dtype(), ctx, [&](auto tag) {
      using T = decltype(tag);
      launch_binary(ctx, math::PRelu{}, layout, x.data<T>(), slope.data<T>(), y.data<T>());
    });
  }

 private:
  bool legacy_;
};

DPRUN_CUDA_COMPUTE("PRelu", make_kernel<PReluCuda>);

}  // namespace
}  // namespace dprun::cuda_ew
