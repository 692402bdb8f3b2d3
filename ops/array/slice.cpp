// Slice: a strided copy of the view SliceParams selects (ops/array/slice.h).
#include "ops/array/slice.h"
#include "engine/op_facts.h"
#include "ops/cpu/data_movement.h"

namespace dprun {
namespace {

DPRUN_REGISTER_KERNEL({.op_type = "Slice",
                       .since = 1,
                       .factory = make_kernel<ViewCopyKernel<SliceParams, cpu_view_copy>>});

}  // namespace
}  // namespace dprun

// The ops' facts (engine/op_facts.h): output types, shapes, 16-bit and layout policy.
namespace dprun {
namespace {
DPRUN_REGISTER_OP_FACTS({.op_type = "Slice", .shape = ShapeKind::SameRank});

}  // namespace
}  // namespace dprun
