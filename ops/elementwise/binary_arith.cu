// The compute of the CUDA binary arithmetic (defined in ops/elementwise/binary_arith_cuda_def.cpp)
// with numpy broadcasting (legacy broadcast/axis before opset 7): Add, Sub, Mul over the CPU's
// numeric types; Div and Pow over float32/64, float16 and bfloat16 (in float, rounded once: Pow
// squares a decomposed LayerNormalization's deviations, in 16-bit training graphs too). Integer Div
// is left to the CPU: it must fail on a zero divisor, which a GPU kernel cannot report without a
// sync.
#include "ops/cuda/elementwise.cuh"
#include "ops/math/binary_functors.h"

namespace dprun::cuda_ew {
namespace {

/// Pow: a float base with an exponent of any numeric dtype (opset 12+ allows them to
/// differ); the output has the base's dtype.
class PowKernel : public OpKernel {
 public:
  using Types = FloatAndHalfTypes;
  using ExponentTypes = NumericAndHalfTypes;
  explicit PowKernel(const KernelInfo& info) : legacy_(info.opset < 7) {}
  void compute(KernelContext& ctx) const override {
    const Tensor& a = ctx.input(0);
    const Tensor& b = ctx.input(1);
    const Layout<2> layout = binary_layout(ctx, a.shape(), b.shape(), legacy_);
    Tensor& out = ctx.allocate_output(0, layout.out_shape, a.dtype());
    dispatch(Types{}, a.dtype(), ctx, [&](auto base_tag) {
      using T = decltype(base_tag);
      dispatch(ExponentTypes{}, b.dtype(), ctx, [&](auto exp_tag) {
        using E = decltype(exp_tag);
        launch_binary(ctx, math::Pow{}, layout, a.data<T>(), b.data<E>(), out.data<T>());
      });
    });
  }

 private:
  bool legacy_;
};

// Comma-free names: a macro argument cannot hold a template-id with two arguments.
template <class Op>
using Numeric = BinaryKernel<Op, NumericAndHalfTypes>;
using DivKernel = BinaryKernel<math::Div, FloatAndHalfTypes>;

DPRUN_CUDA_ELEMENTWISE("Add", Numeric<math::Add>);
DPRUN_CUDA_ELEMENTWISE("Sub", Numeric<math::Sub>);
DPRUN_CUDA_ELEMENTWISE("Mul", Numeric<math::Mul>);
DPRUN_CUDA_ELEMENTWISE("Div", DivKernel);
DPRUN_CUDA_ELEMENTWISE("Pow", PowKernel);

}  // namespace
}  // namespace dprun::cuda_ew
