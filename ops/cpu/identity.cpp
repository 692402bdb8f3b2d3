// Identity: forwards its input without copying.
#include "engine/kernel.h"

namespace dprun {
namespace {

class IdentityKernel : public OpKernel {
 public:
  explicit IdentityKernel(const KernelInfo&) {}
  void compute(KernelContext& ctx) const override { ctx.set_output(0, ctx.input(0)); }
};

DPRUN_REGISTER_KERNEL({.op_type = "Identity", .since = 1, .factory = make_kernel<IdentityKernel>});

}  // namespace
}  // namespace dprun
