// Identity: forwards its input without copying.
#include "ops/cpu/view_kernels.h"

namespace dprun {
namespace {

DPRUN_REGISTER_KERNEL({.op_type = "Identity", .since = 1, .factory = make_kernel<IdentityKernel>});

}  // namespace
}  // namespace dprun
