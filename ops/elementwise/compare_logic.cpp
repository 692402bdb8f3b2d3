// Comparisons (Equal, Less, LessOrEqual, Greater, GreaterOrEqual) and logical And, Or, Xor:
// broadcasting binary ops with a bool result. Before opset 7 they use broadcast/axis.
#include "engine/op_facts.h"
#include "ops/cpu/elementwise.h"
#include "ops/math/binary_functors.h"

namespace dprun::ew {
namespace {

template <class Op, Types kT>
using C = BinaryKernel<Op, kT, true>;

DPRUN_REGISTER_KERNEL({.op_type = "Equal",
                       .since = 1,
                       .factory = make_kernel<C<math::Equal, Types::Any>>});
DPRUN_REGISTER_KERNEL({.op_type = "Less",
                       .since = 1,
                       .factory = make_kernel<C<math::Less, Types::Numeric>>});
DPRUN_REGISTER_KERNEL({.op_type = "LessOrEqual",
                       .since = 12,
                       .factory = make_kernel<C<math::LessOrEqual, Types::Numeric>>});
DPRUN_REGISTER_KERNEL({.op_type = "Greater",
                       .since = 1,
                       .factory = make_kernel<C<math::Greater, Types::Numeric>>});
DPRUN_REGISTER_KERNEL({.op_type = "GreaterOrEqual",
                       .since = 12,
                       .factory = make_kernel<C<math::GreaterOrEqual, Types::Numeric>>});
DPRUN_REGISTER_KERNEL({.op_type = "And",
                       .since = 1,
                       .factory = make_kernel<C<math::And, Types::Bool>>});
DPRUN_REGISTER_KERNEL({.op_type = "Or",
                       .since = 1,
                       .factory = make_kernel<C<math::Or, Types::Bool>>});
DPRUN_REGISTER_KERNEL({.op_type = "Xor",
                       .since = 1,
                       .factory = make_kernel<C<math::Xor, Types::Bool>>});

}  // namespace
}  // namespace dprun::ew

// The ops' facts (engine/op_facts.h): output types, shapes, 16-bit and layout policy.
namespace dprun {
namespace {
DPRUN_REGISTER_OP_FACTS({.op_type = "And",
                         .dtype = OutputDTypeRule::fixed(DType::Bool),
                         .shape = ShapeKind::Broadcast});
DPRUN_REGISTER_OP_FACTS({.op_type = "Equal",
                         .dtype = OutputDTypeRule::fixed(DType::Bool),
                         .shape = ShapeKind::Broadcast});
DPRUN_REGISTER_OP_FACTS({.op_type = "Greater",
                         .dtype = OutputDTypeRule::fixed(DType::Bool),
                         .shape = ShapeKind::Broadcast});
DPRUN_REGISTER_OP_FACTS({.op_type = "GreaterOrEqual",
                         .dtype = OutputDTypeRule::fixed(DType::Bool),
                         .shape = ShapeKind::Broadcast});
DPRUN_REGISTER_OP_FACTS({.op_type = "Less",
                         .dtype = OutputDTypeRule::fixed(DType::Bool),
                         .shape = ShapeKind::Broadcast});
DPRUN_REGISTER_OP_FACTS({.op_type = "LessOrEqual",
                         .dtype = OutputDTypeRule::fixed(DType::Bool),
                         .shape = ShapeKind::Broadcast});
DPRUN_REGISTER_OP_FACTS({.op_type = "Or",
                         .dtype = OutputDTypeRule::fixed(DType::Bool),
                         .shape = ShapeKind::Broadcast});
DPRUN_REGISTER_OP_FACTS({.op_type = "Xor",
                         .dtype = OutputDTypeRule::fixed(DType::Bool),
                         .shape = ShapeKind::Broadcast});

}  // namespace
}  // namespace dprun
