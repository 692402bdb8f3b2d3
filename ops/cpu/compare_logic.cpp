// Comparisons (Equal, Less, LessOrEqual, Greater, GreaterOrEqual) and logical And, Or, Xor:
// broadcasting binary ops with a bool result. Before opset 7 they use broadcast/axis.
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
