// Activations: Relu, LeakyRelu, Elu, Selu, Celu, Sigmoid, Tanh, HardSigmoid, HardSwish,
// Softplus, Softsign, ThresholdedRelu, Mish, Gelu, Shrink (unary) and PRelu (binary); and the
// op fusion's Gelu (domain "dprun", engine/rewrites/op_fusion.h), either form before Gelu-20.
#include "engine/op_facts.h"
#include "engine/rewrites/rewrite_domain.h"
#include "ops/cpu/elementwise.h"
#include "ops/elementwise/prelu.h"
#include "ops/math/binary_functors.h"
#include "ops/math/unary_functors.h"

namespace dprun::ew {

namespace {

/// Gelu picks its functor from `approximate` when built, keeping the inner loop branch-free.
std::unique_ptr<OpKernel> make_gelu(const KernelInfo& info) {
  if (gelu_uses_tanh(info)) return make_kernel<UnaryKernel<math::GeluTanh, Types::Float>>(info);
  return make_kernel<UnaryKernel<math::Gelu, Types::Float>>(info);
}

/// The op fusion's Gelu: the erf form as the exporters' chain computes it, or the tanh form.
std::unique_ptr<OpKernel> make_fused_gelu(const KernelInfo& info) {
  if (gelu_uses_tanh(info)) return make_kernel<UnaryKernel<math::GeluTanh, Types::Float>>(info);
  return make_kernel<UnaryKernel<math::GeluErfForm, Types::Float>>(info);
}

/// PRelu: slope broadcasts unidirectionally to X (ops/elementwise/prelu.h).
class PReluKernel : public OpKernel {
 public:
  explicit PReluKernel(const KernelInfo& info) : legacy_(info.opset < 7) {}
  void compute(KernelContext& ctx) const override {
    const Tensor& x = ctx.input(0);
    const Tensor slope = prelu_slope(ctx, x, ctx.input(1), legacy_);
    Tensor& y = ctx.allocate_output(0, x.shape(), x.dtype());
    visit_dtype(x.dtype(), [&](auto tag) {
      using T = decltype(tag);
      if constexpr (!accepts<Types::Signed, T>()) {
        fail_dtype(ctx, x.dtype());
      } else if constexpr (is_half_v<T>) {
        half_binary_map<T>(ctx.execution(), x, slope, y, math::PRelu{});
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
DPRUN_REGISTER_KERNEL({.domain = kRewriteDomain, .op_type = "Gelu", .factory = make_fused_gelu});
DPRUN_REGISTER_KERNEL({.op_type = "Shrink",
                       .since = 9,
                       .factory = make_kernel<U<math::Shrink, Types::Numeric>>});
DPRUN_REGISTER_KERNEL({.op_type = "PRelu", .since = 1, .factory = make_kernel<PReluKernel>});

}  // namespace
}  // namespace dprun::ew

// The ops' facts (engine/op_facts.h): output types, shapes, 16-bit and layout policy.
namespace dprun {
namespace {
DPRUN_REGISTER_OP_FACTS({.op_type = "Celu", .shape = ShapeKind::SameAsInput0});
DPRUN_REGISTER_OP_FACTS({.op_type = "Elu",
                         .shape = ShapeKind::SameAsInput0,
                         .layout = kLayoutUnary});
DPRUN_REGISTER_OP_FACTS({.op_type = "Gelu", .shape = ShapeKind::SameAsInput0});
DPRUN_REGISTER_OP_FACTS({.op_type = "HardSigmoid",
                         .shape = ShapeKind::SameAsInput0,
                         .layout = kLayoutUnary});
DPRUN_REGISTER_OP_FACTS({.op_type = "HardSwish",
                         .shape = ShapeKind::SameAsInput0,
                         .layout = kLayoutUnary});
DPRUN_REGISTER_OP_FACTS({.op_type = "LeakyRelu",
                         .shape = ShapeKind::SameAsInput0,
                         .layout = kLayoutUnary});
DPRUN_REGISTER_OP_FACTS({.op_type = "Mish", .shape = ShapeKind::SameAsInput0});
DPRUN_REGISTER_OP_FACTS({.op_type = "PRelu", .shape = ShapeKind::SameAsInput0});
DPRUN_REGISTER_OP_FACTS({.op_type = "Relu",
                         .shape = ShapeKind::SameAsInput0,
                         .layout = kLayoutUnary});
DPRUN_REGISTER_OP_FACTS({.op_type = "Selu",
                         .shape = ShapeKind::SameAsInput0,
                         .layout = kLayoutUnary});
DPRUN_REGISTER_OP_FACTS({.op_type = "Shrink", .shape = ShapeKind::SameAsInput0});
DPRUN_REGISTER_OP_FACTS({.op_type = "Sigmoid",
                         .shape = ShapeKind::SameAsInput0,
                         .layout = kLayoutUnary});
DPRUN_REGISTER_OP_FACTS({.op_type = "Softplus",
                         .shape = ShapeKind::SameAsInput0,
                         .layout = kLayoutUnary});
DPRUN_REGISTER_OP_FACTS({.op_type = "Softsign", .shape = ShapeKind::SameAsInput0});
DPRUN_REGISTER_OP_FACTS({.op_type = "Tanh",
                         .shape = ShapeKind::SameAsInput0,
                         .layout = kLayoutUnary});
DPRUN_REGISTER_OP_FACTS({.op_type = "ThresholdedRelu", .shape = ShapeKind::SameAsInput0});

}  // namespace
}  // namespace dprun
