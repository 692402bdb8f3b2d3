// Binary arithmetic with numpy broadcasting: Add, Sub, Mul, Div, Pow, Mod, BitShift,
// BitwiseAnd/Or/Xor. Before opset 7, Add/Sub/Mul/Div/Pow use the broadcast/axis attributes.
#include <optional>
#include <type_traits>

#include "engine/op_facts.h"
#include "ops/cpu/elementwise.h"
#include "ops/math/binary_functors.h"

namespace dprun::ew {

template <>
inline constexpr bool kNeedsNonzeroDivisor<math::Div> = true;
template <>
inline constexpr bool kNeedsNonzeroDivisor<math::Mod> = true;

template <>
math::Mod make_functor<math::Mod>(const KernelInfo& info) {
  int64_t fmod = info.node.attr_int("fmod", 0);
  if (fmod != 0 && fmod != 1) info.node.fail("fmod must be 0 or 1, got ", fmod);
  return {fmod == 1};
}

template <>
math::BitShift make_functor<math::BitShift>(const KernelInfo& info) {
  std::string dir = info.node.attr_string("direction");
  if (dir != "LEFT" && dir != "RIGHT")
    info.node.fail("direction must be LEFT or RIGHT, got '", dir, "'");
  return {dir == "LEFT"};
}

namespace {

/// The one exponent of every element when `exponent` holds a single value, as a double.
template <class E>
std::optional<double> single_exponent(const Tensor& exponent) {
  if (exponent.numel() != 1) return std::nullopt;
  return static_cast<double>(static_cast<compute_t<E>>(exponent.data<E>()[0]));
}

/// Pow: the exponent may have a different numeric type than the base (opset 12+); the
/// output has the base's type.
class PowKernel : public OpKernel {
 public:
  explicit PowKernel(const KernelInfo& info) : legacy_(info.opset < 7) {}
  void compute(KernelContext& ctx) const override {
    const Tensor& a = ctx.input(0);
    Tensor b = ctx.input(1);
    if (legacy_) b = legacy_align(ctx, a, b);
    Shape out_shape = broadcast_all(ctx, {&a.shape(), &b.shape()});
    Tensor& out = ctx.allocate_output(0, out_shape, a.dtype());
    visit_dtype(a.dtype(), [&](auto base_tag) {
      using T = decltype(base_tag);
      if constexpr (!accepts<Types::Numeric, T>()) {
        fail_dtype(ctx, a.dtype());
      } else {
        visit_dtype(b.dtype(), [&](auto exp_tag) {
          using E = decltype(exp_tag);
          if constexpr (!accepts<Types::Numeric, E>()) {
            ctx.fail("exponent dtype ", dtype_name(b.dtype()), " is not supported");
          } else {
            compute_typed<T, E>(ctx, a, b, out);
          }
        });
      }
    });
  }

 private:
  template <class T, class E>
  static void compute_typed(KernelContext& ctx, const Tensor& a, const Tensor& b, Tensor& out) {
    using CT = compute_t<T>;
    using CE = compute_t<E>;
    if constexpr (std::is_floating_point_v<CT>) {
      // x^2 and x^1 of a float are exactly x * x and x (pow is exact for them), and std::pow
      // costs tens of cycles an element: the exporters' LayerNorm squares by Pow(d, 2), and
      // Pow's gradient raises to the exponent minus one.
      const std::optional<double> e = single_exponent<E>(b);
      if (e == 2.0) {
        binary_map<T, E, T>(ctx.execution(), a, b, out, [](T x, E) {
          const CT v = static_cast<CT>(x);
          return convert<T>(v * v);
        });
        return;
      }
      if (e == 1.0) {
        binary_map<T, E, T>(ctx.execution(), a, b, out, [](T x, E) { return x; });
        return;
      }
    }
    binary_map<T, E, T>(ctx.execution(), a, b, out, [](T x, E y) {
      return convert<T>(math::Pow{}(static_cast<CT>(x), static_cast<CE>(y)));
    });
  }

  bool legacy_;
};

template <class Op, Types kT>
using B = BinaryKernel<Op, kT>;

DPRUN_REGISTER_KERNEL({.op_type = "Add",
                       .since = 1,
                       .factory = make_kernel<B<math::Add, Types::Numeric>>});
DPRUN_REGISTER_KERNEL({.op_type = "Sub",
                       .since = 1,
                       .factory = make_kernel<B<math::Sub, Types::Numeric>>});
DPRUN_REGISTER_KERNEL({.op_type = "Mul",
                       .since = 1,
                       .factory = make_kernel<B<math::Mul, Types::Numeric>>});
DPRUN_REGISTER_KERNEL({.op_type = "Div",
                       .since = 1,
                       .factory = make_kernel<B<math::Div, Types::Numeric>>});
DPRUN_REGISTER_KERNEL({.op_type = "Mod",
                       .since = 10,
                       .factory = make_kernel<B<math::Mod, Types::Numeric>>});
DPRUN_REGISTER_KERNEL({.op_type = "Pow", .since = 1, .factory = make_kernel<PowKernel>});
DPRUN_REGISTER_KERNEL({.op_type = "BitShift",
                       .since = 11,
                       .factory = make_kernel<B<math::BitShift, Types::Unsigned>>});
DPRUN_REGISTER_KERNEL({.op_type = "BitwiseAnd",
                       .since = 18,
                       .factory = make_kernel<B<math::BitwiseAnd, Types::Integral>>});
DPRUN_REGISTER_KERNEL({.op_type = "BitwiseOr",
                       .since = 18,
                       .factory = make_kernel<B<math::BitwiseOr, Types::Integral>>});
DPRUN_REGISTER_KERNEL({.op_type = "BitwiseXor",
                       .since = 18,
                       .factory = make_kernel<B<math::BitwiseXor, Types::Integral>>});

}  // namespace
}  // namespace dprun::ew

// The ops' facts (engine/op_facts.h): output types, shapes, 16-bit and layout policy.
namespace dprun {
namespace {
DPRUN_REGISTER_OP_FACTS({.op_type = "Add", .shape = ShapeKind::Broadcast, .layout = kLayoutBinary});
DPRUN_REGISTER_OP_FACTS({.op_type = "BitShift", .shape = ShapeKind::Broadcast});
DPRUN_REGISTER_OP_FACTS({.op_type = "BitwiseAnd"});
DPRUN_REGISTER_OP_FACTS({.op_type = "BitwiseOr"});
DPRUN_REGISTER_OP_FACTS({.op_type = "BitwiseXor"});
DPRUN_REGISTER_OP_FACTS({.op_type = "Div", .shape = ShapeKind::Broadcast, .layout = kLayoutBinary});
DPRUN_REGISTER_OP_FACTS({.op_type = "Mod", .shape = ShapeKind::Broadcast});
DPRUN_REGISTER_OP_FACTS({.op_type = "Mul", .shape = ShapeKind::Broadcast, .layout = kLayoutBinary});
DPRUN_REGISTER_OP_FACTS({.op_type = "Pow", .shape = ShapeKind::Broadcast});
DPRUN_REGISTER_OP_FACTS({.op_type = "Sub", .shape = ShapeKind::Broadcast, .layout = kLayoutBinary});

}  // namespace
}  // namespace dprun
