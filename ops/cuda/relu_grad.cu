// ReluGrad (rewrite domain) on CUDA: dY * (X > 0 ? 1 : 0) for float32 and float64, broadcast as
// Mul's operands (the fused form of ops/grad/relu_grad.cpp's Mul(dY, Cast(Greater(X, 0))); the
// node's contract: engine/rewrites/op_fusion.h). The functor is the CPU kernel's.
#include "engine/rewrites/rewrite_domain.h"
#include "ops/cuda/elementwise.cuh"
#include "ops/math/binary_functors.h"

namespace dprun::cuda_ew {
namespace {

class ReluGradCuda : public OpKernel {
 public:
  using Types = FloatTypes;
  explicit ReluGradCuda(const KernelInfo&) {}

  void compute(KernelContext& ctx) const override {
    const Tensor& dy = ctx.input(0);
    const Tensor& x = ctx.input(1);
    if (dy.dtype() != x.dtype())
      ctx.fail("dY is ", dtype_name(dy.dtype()), " but X is ", dtype_name(x.dtype()));
    // Numpy broadcasting: the node is of the rewrite domain, whose opset 1 is no legacy Mul.
    const Layout<2> layout = binary_layout(ctx, dy.shape(), x.shape(), false);
    Tensor& dx = ctx.allocate_output(0, layout.out_shape, dy.dtype());
    dispatch(Types{}, dy.dtype(), ctx, [&](auto tag) {
      using T = decltype(tag);
      launch_binary(ctx, math::ReluGrad{}, layout, dy.data<T>(), x.data<T>(), dx.data<T>());
    });
  }
};

DPRUN_REGISTER_KERNEL({.domain = kRewriteDomain,
                       .op_type = "ReluGrad",
                       .device = DeviceType::CUDA,
                       .dtypes = dtypes(FloatTypes{}),
                       .factory = make_kernel<ReluGradCuda>});

}  // namespace
}  // namespace dprun::cuda_ew
