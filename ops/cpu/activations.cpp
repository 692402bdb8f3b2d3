// Activations: Relu, LeakyRelu, Elu, Selu, Celu, Sigmoid, Tanh, HardSigmoid, HardSwish,
// Softplus, Softsign, ThresholdedRelu, Mish, Gelu, Shrink (unary) and PRelu (binary).
#include "ops/cpu/elementwise.h"
#include "ops/math/binary_functors.h"
#include "ops/math/unary_functors.h"

namespace dprun::ew {

template <>
math::LeakyRelu make_functor<math::LeakyRelu>(const KernelInfo& info) {
  return {info.node.attr_float("alpha", 0.01f)};
}
template <>
math::Elu make_functor<math::Elu>(const KernelInfo& info) {
  return {info.node.attr_float("alpha", 1.0f)};
}
template <>
math::Selu make_functor<math::Selu>(const KernelInfo& info) {
  return {info.node.attr_float("alpha", 1.67326319217681884765625f),
          info.node.attr_float("gamma", 1.05070102214813232421875f)};
}
template <>
math::Celu make_functor<math::Celu>(const KernelInfo& info) {
  float alpha = info.node.attr_float("alpha", 1.0f);
  if (alpha == 0.0f) info.node.fail("alpha must be non-zero");
  return {alpha};
}
template <>
math::HardSigmoid make_functor<math::HardSigmoid>(const KernelInfo& info) {
  return {info.node.attr_float("alpha", 0.2f), info.node.attr_float("beta", 0.5f)};
}
template <>
math::ThresholdedRelu make_functor<math::ThresholdedRelu>(const KernelInfo& info) {
  return {info.node.attr_float("alpha", 1.0f)};
}
template <>
math::Shrink make_functor<math::Shrink>(const KernelInfo& info) {
  return {info.node.attr_float("lambd", 0.5f), info.node.attr_float("bias", 0.0f)};
}

namespace {

/// Gelu picks its functor from `approximate` when built, keeping the inner loop branch-free.
std::unique_ptr<OpKernel> make_gelu(const KernelInfo& info) {
  std::string approx = info.node.attr_string("approximate", "none");
  if (approx == "none") return make_kernel<UnaryKernel<math::Gelu, Types::Float>>(info);
  if (approx == "tanh") return make_kernel<UnaryKernel<math::GeluTanh, Types::Float>>(info);
  info.node.fail("approximate must be 'none' or 'tanh', got '", approx, "'");
}

/// PRelu: slope broadcasts unidirectionally to X. Before opset 7 a 1-D slope of X's channel
/// count applies per channel (axis 1), as Caffe-era exporters assumed.
class PReluKernel : public OpKernel {
 public:
  explicit PReluKernel(const KernelInfo& info) : legacy_(info.opset < 7) {}
  void compute(KernelContext& ctx) const override {
    const Tensor& x = ctx.input(0);
    Tensor slope = ctx.input(1);
    if (x.dtype() != slope.dtype())
      ctx.fail("X is ", dtype_name(x.dtype()), " but slope is ", dtype_name(slope.dtype()));
    if (legacy_ && slope.rank() == 1 && slope.numel() > 1 && x.rank() >= 2 &&
        slope.numel() == x.shape()[1]) {
      Shape s(x.shape().size(), 1);
      s[1] = slope.numel();
      slope = slope.reshape(s);
    }
    if (!broadcasts_to(slope.shape(), x.shape()))
      ctx.fail("slope of shape ", shape_to_string(slope.shape()),
               " does not broadcast to X of shape ", shape_to_string(x.shape()));
    Tensor& y = ctx.allocate_output(0, x.shape(), x.dtype());
    visit_dtype(x.dtype(), [&](auto tag) {
      using T = decltype(tag);
      if constexpr (!accepts<Types::Signed, T>()) {
        fail_dtype(ctx, x.dtype());
      } else if constexpr (is_half_v<T>) {
        binary_map<T, T, T>(ctx.execution(), x, slope, y, [](T a, T b) {
          return T(math::PRelu{}(static_cast<float>(a), static_cast<float>(b)));
        });
      } else {
        binary_map<T, T, T>(ctx.execution(), x, slope, y, math::PRelu{});
      }
    });
  }

 private:
  bool legacy_;
};

template <class Op, Types kT = Types::Float>
using U = UnaryKernel<Op, kT>;

DPRUN_REGISTER_KERNEL({.op_type = "Relu",
                       .since = 1,
                       .factory = make_kernel<U<math::Relu, Types::Signed>>});
DPRUN_REGISTER_KERNEL({.op_type = "LeakyRelu",
                       .since = 1,
                       .factory = make_kernel<U<math::LeakyRelu>>});
DPRUN_REGISTER_KERNEL({.op_type = "Elu", .since = 1, .factory = make_kernel<U<math::Elu>>});
DPRUN_REGISTER_KERNEL({.op_type = "Selu", .since = 1, .factory = make_kernel<U<math::Selu>>});
DPRUN_REGISTER_KERNEL({.op_type = "Celu", .since = 12, .factory = make_kernel<U<math::Celu>>});
DPRUN_REGISTER_KERNEL({.op_type = "Sigmoid", .since = 1, .factory = make_kernel<U<math::Sigmoid>>});
DPRUN_REGISTER_KERNEL({.op_type = "Tanh", .since = 1, .factory = make_kernel<U<math::Tanh>>});
DPRUN_REGISTER_KERNEL({.op_type = "HardSigmoid",
                       .since = 1,
                       .factory = make_kernel<U<math::HardSigmoid>>});
DPRUN_REGISTER_KERNEL({.op_type = "HardSwish",
                       .since = 14,
                       .factory = make_kernel<U<math::HardSwish>>});
DPRUN_REGISTER_KERNEL({.op_type = "Softplus",
                       .since = 1,
                       .factory = make_kernel<U<math::Softplus>>});
DPRUN_REGISTER_KERNEL({.op_type = "Softsign",
                       .since = 1,
                       .factory = make_kernel<U<math::Softsign>>});
DPRUN_REGISTER_KERNEL({.op_type = "ThresholdedRelu",
                       .since = 1,
                       .factory = make_kernel<U<math::ThresholdedRelu>>});
DPRUN_REGISTER_KERNEL({.op_type = "Mish", .since = 18, .factory = make_kernel<U<math::Mish>>});
DPRUN_REGISTER_KERNEL({.op_type = "Gelu", .since = 20, .factory = make_gelu});
DPRUN_REGISTER_KERNEL({.op_type = "Shrink",
                       .since = 9,
                       .factory = make_kernel<U<math::Shrink, Types::Numeric>>});
DPRUN_REGISTER_KERNEL({.op_type = "PRelu", .since = 1, .factory = make_kernel<PReluKernel>});

}  // namespace
}  // namespace dprun::ew
