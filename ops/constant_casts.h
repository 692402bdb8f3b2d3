#pragma once
// A Cast kernel's kept casts of constant inputs, shared by the CPU and CUDA Cast kernels.
#include <memory>
#include <mutex>
#include <vector>

#include "engine/kernel.h"
#include "engine/stream_order.h"
#include "engine/tensor.h"

namespace dprun {

/// The casts of a constant input (a parameter, a Constant's value), each kept while the
/// model's parameters keep their version (KernelContext::parameters_version), one per
/// parameter storage (the replicas of a DataParallel model share the kernel): the 16-bit
/// conversion and the float32 kernels run between Casts (engine/rewrites/float32_fallback.h) would
/// otherwise cast the same weights at every run. Runs share the kept tensor, which they only
/// read; it is never sole-owned, so no kernel writes over it. Thread-safe.
class ConstantCasts {
 public:
  /// Sets output 0 of `ctx` to the kept cast of `in` for the run's parameter version, or to
  /// what `cast` writes there (then kept, once it is complete: the run waits for its device,
  /// since later runs may read it from other streams). Runs of unknown version always cast.
  template <class Cast>
  void cast_or_reuse(KernelContext& ctx, const Tensor& in, const Cast& cast) const {
    const uint64_t version = ctx.parameters_version();
    if (version == 0) return cast();
    if (Tensor kept = find(in, version); kept.defined()) {
      // The run's stream reads it: its memory is not reused before (record_stream).
      use_on_stream(kept, ctx.device(), StreamWait::Handover);
      return ctx.set_output(0, kept);
    }
    cast();
    ctx.execution().synchronize();
    keep(in, version, ctx.output(0));
  }

 private:
  /// The kept cast of `in`, or an undefined tensor.
  Tensor find(const Tensor& in, uint64_t version) const {
    std::lock_guard lock(mutex_);
    for (const Entry& e : entries_)
      if (e.data == in.raw_data() && e.version == version && !e.storage.expired()) return e.cast;
    return {};
  }
  void keep(const Tensor& in, uint64_t version, const Tensor& cast) const {
    std::lock_guard lock(mutex_);
    std::erase_if(entries_,
                  [&](const Entry& e) { return e.storage.expired() || e.data == in.raw_data(); });
    entries_.push_back({in.storage_handle(), in.raw_data(), version, cast});
  }

  struct Entry {
    std::weak_ptr<const Storage> storage;  // entries of freed storage are dropped
    const void* data;
    uint64_t version;
    Tensor cast;
  };
  mutable std::mutex mutex_;
  mutable std::vector<Entry> entries_;
};

}  // namespace dprun
