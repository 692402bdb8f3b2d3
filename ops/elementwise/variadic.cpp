// Variadic Sum, Mean, Min, Max with numpy broadcasting of all inputs (opset 8+; earlier
// opsets required equal shapes, a special case).
#include "engine/op_facts.h"
#include "ops/cpu/elementwise.h"
#include "ops/math/binary_functors.h"

namespace dprun::ew {
namespace {

template <class Op, Types kT, bool kMean = false>
class VariadicKernel : public OpKernel {
 public:
  explicit VariadicKernel(const KernelInfo&) {}
  void compute(KernelContext& ctx) const override {
    const size_t n = ctx.input_count();
    if (n == 0) ctx.fail("needs at least one input");
    std::vector<const Shape*> shapes;
    const DType dtype = ctx.input(0).dtype();
    for (size_t i = 0; i < n; ++i) {
      const Tensor& t = ctx.input(i);
      if (t.dtype() != dtype)
        ctx.fail("input ", i, " is ", dtype_name(t.dtype()), " but input 0 is ", dtype_name(dtype));
      shapes.push_back(&t.shape());
    }
    Shape out_shape = broadcast_all(ctx, shapes);
    visit_dtype(dtype, [&](auto tag) {
      using T = decltype(tag);
      if constexpr (!accepts<kT, T>()) {
        fail_dtype(ctx, dtype);
      } else if constexpr (is_half_v<T>) {
        // Accumulate in float so intermediate results are not rounded to 16 bits.
        Tensor acc = Tensor::empty(out_shape, DType::Float32, ctx.device());
        run<float>(ctx, acc, [&](const Tensor& t) { return to_float32(ctx.execution(), t); });
        from_float32(ctx.execution(), acc, ctx.allocate_output(0, out_shape, dtype));
      } else {
        run<T>(ctx, ctx.allocate_output(0, out_shape, dtype), [](const Tensor& t) { return t; });
      }
    });
  }

 private:
  template <class T, class Load>
  void run(const KernelContext& ctx, Tensor& out, const Load& load) const {
    const size_t n = ctx.input_count();
    const Op op{};
    if (n == 1) {
      const Tensor in = load(ctx.input(0));
      binary_map<T, T, T>(ctx.execution(), in, in, out, [](T x, T) { return x; });
    } else {
      binary_map<T, T, T>(ctx.execution(), load(ctx.input(0)), load(ctx.input(1)), out, op);
      for (size_t i = 2; i < n; ++i)
        binary_map<T, T, T>(ctx.execution(), out, load(ctx.input(i)), out, op);
    }
    if constexpr (kMean) {
      const T scale = T(1) / static_cast<T>(n);
      T* p = out.data<T>();
      unary_map(ctx.execution(), p, p, out.numel(), [scale](T v) { return v * scale; });
    }
  }
};

DPRUN_REGISTER_KERNEL({.op_type = "Sum",
                       .since = 1,
                       .factory = make_kernel<VariadicKernel<math::Add, Types::Numeric>>});
DPRUN_REGISTER_KERNEL({.op_type = "Mean",
                       .since = 1,
                       .factory = make_kernel<VariadicKernel<math::Add, Types::Float, true>>});
DPRUN_REGISTER_KERNEL({.op_type = "Min",
                       .since = 1,
                       .factory = make_kernel<VariadicKernel<math::Min, Types::Numeric>>});
DPRUN_REGISTER_KERNEL({.op_type = "Max",
                       .since = 1,
                       .factory = make_kernel<VariadicKernel<math::Max, Types::Numeric>>});

}  // namespace
}  // namespace dprun::ew

// The ops' facts (engine/op_facts.h): output types, shapes, 16-bit and layout policy.
namespace dprun {
namespace {
DPRUN_REGISTER_OP_FACTS({.op_type = "Max", .shape = ShapeKind::Broadcast});
DPRUN_REGISTER_OP_FACTS({.op_type = "Mean", .shape = ShapeKind::Broadcast});
DPRUN_REGISTER_OP_FACTS({.op_type = "Min", .shape = ShapeKind::Broadcast});
DPRUN_REGISTER_OP_FACTS({.op_type = "Sum", .shape = ShapeKind::Broadcast});

}  // namespace
}  // namespace dprun
