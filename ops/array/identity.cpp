// Identity: forwards its input without copying.
#include "engine/op_facts.h"
#include "ops/array/view_kernels.h"

namespace dprun {
namespace {

DPRUN_REGISTER_KERNEL({.op_type = "Identity", .since = 1, .factory = make_kernel<IdentityKernel>});

}  // namespace
}  // namespace dprun

// The ops' facts (engine/op_facts.h): output types, shapes, 16-bit and layout policy.
namespace dprun {
namespace {
DPRUN_REGISTER_OP_FACTS({.op_type = "Identity",
                         .shape = ShapeKind::SameAsInput0,
                         .layout = kLayoutUnary,
                         .keeps_values = true});

}  // namespace
}  // namespace dprun
