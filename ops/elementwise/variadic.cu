// The compute of the CUDA variadic Sum, Mean, Min, Max (defined in
// ops/elementwise/variadic_cuda_def.cpp), with numpy broadcasting of all inputs, as the CPU kernels
// (ops/elementwise/variadic.cpp) compute them: input 0 broadcast into the output, then each further
// input combined into it in input order, so floats round as on the CPU; float16 and bfloat16 inputs
// are combined in a float32 accumulator and the result rounded once, as there. Gradient graphs sum
// the gradients of a value used several times with Sum; without this kernel each such Sum would run
// on the host between two copies (in 16-bit training, in float32 between Casts).
#include "ops/cuda/elementwise.cuh"
#include "ops/math/binary_functors.h"

namespace dprun::cuda_ew {
namespace {

/// a, ignoring b: broadcasts input 0 into the output.
struct First {
  template <class T>
  DPRUN_HOST_DEVICE T operator()(T a, T) const {
    return a;
  }
};

/// a scaled by Mean's 1/n, as the CPU kernel scales; b ignored.
template <class T>
struct ScaleBy {
  T scale;
  DPRUN_HOST_DEVICE T operator()(T a, T) const { return a * scale; }
};

/// The value itself: narrows a float32 accumulator into the 16-bit output.
struct Keep {
  template <class T>
  DPRUN_HOST_DEVICE T operator()(T a) const {
    return a;
  }
};

template <class Op, class TypesT, bool kMean = false>
class VariadicKernel : public OpKernel {
 public:
  using Types = TypesT;
  explicit VariadicKernel(const KernelInfo&) {}
  void compute(KernelContext& ctx) const override {
    const size_t n = ctx.input_count();
    if (n == 0) ctx.fail("needs at least one input");
    const DType dtype = ctx.input(0).dtype();
    Shape out_shape = ctx.input(0).shape();
    for (size_t i = 0; i < n; ++i) {
      const Tensor& t = ctx.input(i);
      if (t.dtype() != dtype)
        ctx.fail("input ", i, " is ", dtype_name(t.dtype()), " but input 0 is ", dtype_name(dtype));
      out_shape = binary_layout(ctx, out_shape, t.shape(), false).out_shape;
    }
    Tensor& out = ctx.allocate_output(0, out_shape, dtype);
    dispatch(Types{}, dtype, ctx, [&](auto tag) {
      using T = decltype(tag);
      using A = cuda_half::compute_t<T>;  // the accumulator's type: float for 16-bit inputs
      Tensor wide;
      A* y = nullptr;
      if constexpr (cuda_half::is_16bit_v<T>) {
        wide = Tensor::empty(out_shape, DType::Float32, ctx.device());
        y = wide.data<float>();
      } else {
        y = out.data<T>();
      }
      // Each thread reads and writes only its own output element: the passes run in place.
      launch_binary(ctx, First{}, binary_layout(ctx, ctx.input(0).shape(), out_shape, false),
                    ctx.input(0).data<T>(), y, y);
      for (size_t i = 1; i < n; ++i)
        launch_binary(ctx, Op{}, binary_layout(ctx, out_shape, ctx.input(i).shape(), false), y,
                      ctx.input(i).data<T>(), y);
      if constexpr (kMean)
        launch_binary(ctx, ScaleBy<A>{A(1) / static_cast<A>(n)},
                      binary_layout(ctx, out_shape, out_shape, false), y, y, y);
      if constexpr (cuda_half::is_16bit_v<T>)
        launch_unary(ctx, Keep{}, y, out.data<T>(), out.numel());
    });
  }
};

// Comma-free names: a macro argument cannot hold a template-id with two arguments.
template <class Op>
using Numeric = VariadicKernel<Op, NumericAndHalfTypes>;
using MeanKernel = VariadicKernel<math::Add, FloatAndHalfTypes, true>;

DPRUN_CUDA_ELEMENTWISE("Sum", Numeric<math::Add>);
DPRUN_CUDA_ELEMENTWISE("Mean", MeanKernel);
DPRUN_CUDA_ELEMENTWISE("Min", Numeric<math::Min>);
DPRUN_CUDA_ELEMENTWISE("Max", Numeric<math::Max>);

}  // namespace
}  // namespace dprun::cuda_ew
