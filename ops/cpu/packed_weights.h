#pragma once
// Weights reordered once into the layout a oneDNN primitive wants, and kept while the model's
// parameters do not change, instead of reordered on every call.
#include <atomic>
#include <memory>
#include <mutex>
#include <oneapi/dnnl/dnnl.hpp>
#include <vector>

#include "engine/kernel.h"
#include "ops/cpu/onednn_util.h"

namespace dprun::onednn {

/// The weights input of one kernel in a primitive's layout. Constant weights (an initializer
/// in KernelInfo::constant_inputs) are reordered the first time a run with a known parameter
/// version (KernelContext::parameters_version) asks for them, and again only when that version,
/// the weights' storage or the wanted layout changes: one entry per parameter storage, so the
/// replicas of a DataParallel model, which share the kernel, each keep their own. Other
/// weights (fed inputs, computed values, runs of unknown version) are reordered on every call, as
/// are constant weights once a version's packing served one call only (weights being trained:
/// see get()).
/// Thread-safe: replicas call it concurrently.
class PackedWeights {
 public:
  /// `constant`: the weights input is a constant input of the kernel's node.
  explicit PackedWeights(bool constant) : constant_(constant) {}

  /// True when the weights are a constant input: worth a layout of the primitive's choosing.
  bool constant() const { return constant_; }

  /// `w` in layout `wanted`; `user` describes w's own memory. The returned memory stays valid
  /// while the caller holds it (and `keep`, where given), even if the entry is replaced
  /// meanwhile. With `keep`, weights reordered for this call alone are written to memory of the
  /// device's allocator that `keep` holds (allocated_memory).
  dnnl::memory get(const KernelContext& ctx, const Tensor& w, const dnnl::memory::desc& user,
                   const dnnl::memory::desc& wanted, Tensor* keep = nullptr) const {
    if (user == wanted) return wrap(user, w.raw_data());
    const uint64_t version = ctx.parameters_version();
    if (!constant_ || version == 0 || trained_)
      return keep ? to_layout(ctx, wrap(user, w.raw_data()), wanted, *keep)
                  : to_layout(wrap(user, w.raw_data()), wanted);
    std::lock_guard lock(mutex_);
    // A hit creates nothing: it runs on every call of every kernel with constant weights.
    for (Entry& e : entries_)
      if (e.data == w.raw_data() && e.version == version && !e.storage.expired() &&
          e.layout == wanted) {
        ++e.hits;
        return e.packed;
      }
    std::erase_if(entries_, [](const Entry& e) { return e.storage.expired(); });
    // Reordered under the lock: concurrent replicas asking for the same entry wait for one
    // reorder instead of each doing it; other storages wait too, but only once per version.
    dnnl::memory packed = to_layout(wrap(user, w.raw_data()), wanted);
    // Weights packed anew at a new version before their last packing served a second call are
    // being trained: keeping a packed copy would hold a second copy of the weights through
    // every step for nothing. From then on each call packs its own, freed when the call is
    // done. (Weights updated now and then between runs that reuse the packing keep it.)
    for (const Entry& e : entries_)
      if (e.data == w.raw_data() && e.version != version)
        unused_versions_ = e.hits == 0 ? unused_versions_ + 1 : 0;
    if (unused_versions_ >= 1) {
      entries_.clear();
      trained_ = true;
      return packed;
    }
    std::erase_if(entries_, [&](const Entry& e) { return e.data == w.raw_data(); });
    entries_.push_back({w.storage_handle(), w.raw_data(), version, wanted, packed});
    return packed;
  }

 private:
  struct Entry {
    std::weak_ptr<const Storage> storage;  // entries of freed storage are dropped
    const void* data;
    uint64_t version;
    dnnl::memory::desc layout;
    dnnl::memory packed;
    int64_t hits = 0;  // calls served after the one that packed it
  };
  bool constant_;
  mutable std::atomic<bool> trained_ = false;
  mutable int unused_versions_ = 0;  // versions whose packing served one call only
  mutable std::mutex mutex_;
  mutable std::vector<Entry> entries_;
};

}  // namespace dprun::onednn
