// AllReduceSum (rewrite domain; engine/autograd/sync_batch_norm.h): the elementwise sum of X
// over the replicas of the run (KernelContext::replica_group), added in replica order so that
// every replica gets the same bits; X itself in a run on its own. float32 and float64. The
// node runs on the host on every device type: a GPU plan copies its (small) operand there.
#include "engine/kernel.h"
#include "engine/parallel/replica_group.h"
#include "engine/rewrites/rewrite_domain.h"

namespace dprun {
namespace {

class AllReduceSumKernel : public OpKernel {
 public:
  explicit AllReduceSumKernel(const KernelInfo&) {}

  void compute(KernelContext& ctx) const override {
    const Tensor& x = ctx.input(0);
    Tensor& y = ctx.allocate_output(0, x.shape(), x.dtype());
    ReplicaGroup* group = ctx.replica_group();
    // Each replica gets its own copy: later nodes may write over their inputs in place.
    y.copy_from(group ? group->all_reduce_sum(ctx.replica_index(), ctx.node().outputs[0], x) : x);
  }
};

DPRUN_REGISTER_KERNEL({.domain = kRewriteDomain,
                       .op_type = "AllReduceSum",
                       .dtypes = {DType::Float32, DType::Float64},
                       .factory = make_kernel<AllReduceSumKernel>});

}  // namespace
}  // namespace dprun
