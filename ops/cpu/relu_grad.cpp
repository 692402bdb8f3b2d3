// ReluGrad (rewrite domain): dY where X > 0, else 0 times dY, as ops/grad/relu_grad.cpp writes
// it in ONNX ops, Mul(dY, Cast(Greater(X, 0))), in one pass instead of three (the node's
// contract: engine/rewrites/op_fusion.h). dY and X broadcast as Mul's operands do; an infinite or
// NaN dY where X <= 0 gives NaN, as the product by zero does.
#include "engine/kernel.h"
#include "engine/rewrites/rewrite_domain.h"
#include "ops/cpu/elementwise.h"
#include "ops/math/binary_functors.h"

namespace dprun {
namespace {

class ReluGradKernel : public OpKernel {
 public:
  explicit ReluGradKernel(const KernelInfo&) {}

  void compute(KernelContext& ctx) const override {
    const Tensor& dy = ctx.input(0);
    const Tensor& x = ctx.input(1);
    if (dy.dtype() != x.dtype())
      ctx.fail("dY is ", dtype_name(dy.dtype()), " but X is ", dtype_name(x.dtype()));
    Tensor& dx =
        ctx.allocate_output(0, ew::broadcast_all(ctx, {&dy.shape(), &x.shape()}), dy.dtype());
    visit_dtype_among<float, double>(dy.dtype(), [&](auto tag) {
      using T = decltype(tag);
      ew::binary_map<T, T, T>(ctx.execution(), dy, x, dx, math::ReluGrad{});
    });
  }
};

DPRUN_REGISTER_KERNEL({.domain = kRewriteDomain,
                       .op_type = "ReluGrad",
                       .dtypes = {DType::Float32, DType::Float64},
                       .factory = make_kernel<ReluGradKernel>});

}  // namespace
}  // namespace dprun
