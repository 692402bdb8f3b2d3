// The compute of the CUDA Constant (defined in ops/array/constant_cuda_def.cpp, which declines
// string values: they have no device form, so such a Constant runs on the host). The value is fixed
// when the plan is built, so each GPU gets one device copy, made by the first run on that GPU and
// returned (read-only, as the CPU kernel returns its host tensor) by every later run. A copy per
// run would queue a host-to-device transfer from pageable memory for every Constant of every run
// (62 in the transformer); keeping one copy per device costs its bytes once. The kernel is shared
// by the replicas of a plan, which may run on different GPUs at once, so the copies are keyed by
// device under a mutex; the run that makes a copy waits for it (a copy from pageable memory is
// ordered on the run's stream only), so the value is complete before any other stream reads it.
// Every run records its stream's use of the copy with the allocator (record_stream), so the
// copy's memory is not reused under a run still queued when the plan is dropped.
#include <map>
#include <mutex>

#include "engine/constant_value.h"
#include "engine/kernel.h"
#include "engine/stream_order.h"
#include "ops/cuda/defs/cuda_compute.h"

namespace dprun {
namespace {

class ConstantCuda : public OpKernel {
 public:
  explicit ConstantCuda(const KernelInfo& info) : value_(constant_node_value(info.node)) {}

  void compute(KernelContext& ctx) const override {
    const Device device = ctx.device();
    std::lock_guard lock(mutex_);
    auto it = copies_.find(device.index);
    if (it == copies_.end()) {
      it = copies_.emplace(device.index, value_.to(device)).first;
      ctx.execution().synchronize();
    }
    use_on_stream(it->second, device, StreamWait::Handover);
    ctx.set_output(0, it->second);
  }

 private:
  Tensor value_;
  mutable std::mutex mutex_;
  mutable std::map<int, Tensor> copies_;  // by GPU index
};

DPRUN_CUDA_COMPUTE("Constant", make_kernel<ConstantCuda>);

}  // namespace
}  // namespace dprun
