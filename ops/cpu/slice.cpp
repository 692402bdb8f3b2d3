// Slice: a strided copy of the view SliceParams selects (ops/cpu/slice.h).
#include "ops/cpu/slice.h"

namespace dprun {
namespace {

DPRUN_REGISTER_KERNEL({.op_type = "Slice",
                       .since = 1,
                       .factory = make_kernel<ViewCopyKernel<SliceParams, cpu_view_copy>>});

}  // namespace
}  // namespace dprun
