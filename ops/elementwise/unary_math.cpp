// Unary math: Abs, Neg, Sign, Reciprocal, Sqrt, Exp, Log, Erf, Floor, Ceil, Round, the
// trigonometric and hyperbolic functions, IsNaN, IsInf, Not, BitwiseNot.
#include "engine/op_facts.h"
#include "ops/cpu/elementwise.h"
#include "ops/math/unary_functors.h"

namespace dprun::ew {

namespace {

template <class Op, Types kT>
using U = UnaryKernel<Op, kT>;

DPRUN_REGISTER_KERNEL({.op_type = "Abs",
                       .since = 1,
                       .factory = make_kernel<U<math::Abs, Types::Numeric>>});
DPRUN_REGISTER_KERNEL({.op_type = "Neg",
                       .since = 1,
                       .factory = make_kernel<U<math::Neg, Types::Signed>>});
DPRUN_REGISTER_KERNEL({.op_type = "Sign",
                       .since = 9,
                       .factory = make_kernel<U<math::Sign, Types::Numeric>>});
DPRUN_REGISTER_KERNEL({.op_type = "Reciprocal",
                       .since = 1,
                       .factory = make_kernel<U<math::Reciprocal, Types::Float>>});
DPRUN_REGISTER_KERNEL({.op_type = "Sqrt",
                       .since = 1,
                       .factory = make_kernel<U<math::Sqrt, Types::Float>>});
DPRUN_REGISTER_KERNEL({.op_type = "Exp",
                       .since = 1,
                       .factory = make_kernel<U<math::Exp, Types::Float>>});
DPRUN_REGISTER_KERNEL({.op_type = "Log",
                       .since = 1,
                       .factory = make_kernel<U<math::Log, Types::Float>>});
DPRUN_REGISTER_KERNEL({.op_type = "Erf",
                       .since = 9,
                       .factory = make_kernel<U<math::Erf, Types::Float>>});
DPRUN_REGISTER_KERNEL({.op_type = "Floor",
                       .since = 1,
                       .factory = make_kernel<U<math::Floor, Types::Float>>});
DPRUN_REGISTER_KERNEL({.op_type = "Ceil",
                       .since = 1,
                       .factory = make_kernel<U<math::Ceil, Types::Float>>});
DPRUN_REGISTER_KERNEL({.op_type = "Round",
                       .since = 11,
                       .factory = make_kernel<U<math::Round, Types::Float>>});
DPRUN_REGISTER_KERNEL({.op_type = "Sin",
                       .since = 7,
                       .factory = make_kernel<U<math::Sin, Types::Float>>});
DPRUN_REGISTER_KERNEL({.op_type = "Cos",
                       .since = 7,
                       .factory = make_kernel<U<math::Cos, Types::Float>>});
DPRUN_REGISTER_KERNEL({.op_type = "Tan",
                       .since = 7,
                       .factory = make_kernel<U<math::Tan, Types::Float>>});
DPRUN_REGISTER_KERNEL({.op_type = "Asin",
                       .since = 7,
                       .factory = make_kernel<U<math::Asin, Types::Float>>});
DPRUN_REGISTER_KERNEL({.op_type = "Acos",
                       .since = 7,
                       .factory = make_kernel<U<math::Acos, Types::Float>>});
DPRUN_REGISTER_KERNEL({.op_type = "Atan",
                       .since = 7,
                       .factory = make_kernel<U<math::Atan, Types::Float>>});
DPRUN_REGISTER_KERNEL({.op_type = "Sinh",
                       .since = 9,
                       .factory = make_kernel<U<math::Sinh, Types::Float>>});
DPRUN_REGISTER_KERNEL({.op_type = "Cosh",
                       .since = 9,
                       .factory = make_kernel<U<math::Cosh, Types::Float>>});
DPRUN_REGISTER_KERNEL({.op_type = "Asinh",
                       .since = 9,
                       .factory = make_kernel<U<math::Asinh, Types::Float>>});
DPRUN_REGISTER_KERNEL({.op_type = "Acosh",
                       .since = 9,
                       .factory = make_kernel<U<math::Acosh, Types::Float>>});
DPRUN_REGISTER_KERNEL({.op_type = "Atanh",
                       .since = 9,
                       .factory = make_kernel<U<math::Atanh, Types::Float>>});
DPRUN_REGISTER_KERNEL({.op_type = "IsNaN",
                       .since = 9,
                       .factory = make_kernel<UnaryKernel<math::IsNaN, Types::Float, true>>});
DPRUN_REGISTER_KERNEL({.op_type = "IsInf",
                       .since = 10,
                       .factory = make_kernel<UnaryKernel<math::IsInf, Types::Float, true>>});
DPRUN_REGISTER_KERNEL({.op_type = "Not",
                       .since = 1,
                       .factory = make_kernel<U<math::Not, Types::Bool>>});
DPRUN_REGISTER_KERNEL({.op_type = "BitwiseNot",
                       .since = 18,
                       .factory = make_kernel<U<math::BitwiseNot, Types::Integral>>});

}  // namespace
}  // namespace dprun::ew

// The ops' facts (engine/op_facts.h): output types, shapes, 16-bit and layout policy.
namespace dprun {
namespace {
DPRUN_REGISTER_OP_FACTS({.op_type = "Abs", .shape = ShapeKind::SameAsInput0});
DPRUN_REGISTER_OP_FACTS({.op_type = "Acos", .shape = ShapeKind::SameAsInput0});
DPRUN_REGISTER_OP_FACTS({.op_type = "Acosh", .shape = ShapeKind::SameAsInput0});
DPRUN_REGISTER_OP_FACTS({.op_type = "Asin", .shape = ShapeKind::SameAsInput0});
DPRUN_REGISTER_OP_FACTS({.op_type = "Asinh", .shape = ShapeKind::SameAsInput0});
DPRUN_REGISTER_OP_FACTS({.op_type = "Atan", .shape = ShapeKind::SameAsInput0});
DPRUN_REGISTER_OP_FACTS({.op_type = "Atanh", .shape = ShapeKind::SameAsInput0});
DPRUN_REGISTER_OP_FACTS({.op_type = "BitwiseNot"});
DPRUN_REGISTER_OP_FACTS({.op_type = "Ceil", .shape = ShapeKind::SameAsInput0});
DPRUN_REGISTER_OP_FACTS({.op_type = "Cos", .shape = ShapeKind::SameAsInput0});
DPRUN_REGISTER_OP_FACTS({.op_type = "Cosh", .shape = ShapeKind::SameAsInput0});
DPRUN_REGISTER_OP_FACTS({.op_type = "Erf", .shape = ShapeKind::SameAsInput0});
DPRUN_REGISTER_OP_FACTS({.op_type = "Exp", .shape = ShapeKind::SameAsInput0});
DPRUN_REGISTER_OP_FACTS({.op_type = "Floor", .shape = ShapeKind::SameAsInput0});
DPRUN_REGISTER_OP_FACTS({.op_type = "IsInf",
                         .dtype = OutputDTypeRule::fixed(DType::Bool),
                         .shape = ShapeKind::SameAsInput0});
DPRUN_REGISTER_OP_FACTS({.op_type = "IsNaN",
                         .dtype = OutputDTypeRule::fixed(DType::Bool),
                         .shape = ShapeKind::SameAsInput0});
DPRUN_REGISTER_OP_FACTS({.op_type = "Log", .shape = ShapeKind::SameAsInput0});
DPRUN_REGISTER_OP_FACTS({.op_type = "Neg", .shape = ShapeKind::SameAsInput0});
DPRUN_REGISTER_OP_FACTS({.op_type = "Not",
                         .dtype = OutputDTypeRule::fixed(DType::Bool),
                         .shape = ShapeKind::SameAsInput0});
DPRUN_REGISTER_OP_FACTS({.op_type = "Reciprocal", .shape = ShapeKind::SameAsInput0});
DPRUN_REGISTER_OP_FACTS({.op_type = "Round", .shape = ShapeKind::SameAsInput0});
DPRUN_REGISTER_OP_FACTS({.op_type = "Sign", .shape = ShapeKind::SameAsInput0});
DPRUN_REGISTER_OP_FACTS({.op_type = "Sin", .shape = ShapeKind::SameAsInput0});
DPRUN_REGISTER_OP_FACTS({.op_type = "Sinh", .shape = ShapeKind::SameAsInput0});
DPRUN_REGISTER_OP_FACTS({.op_type = "Sqrt", .shape = ShapeKind::SameAsInput0});
DPRUN_REGISTER_OP_FACTS({.op_type = "Tan", .shape = ShapeKind::SameAsInput0});

}  // namespace
}  // namespace dprun
