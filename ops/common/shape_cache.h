#pragma once
// A small per-kernel cache of state built for one input shape (oneDNN primitives, cuDNN
// algorithm choices), shared by kernels that may run concurrently on several replicas.
#include <cstdint>
#include <initializer_list>
#include <map>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include "engine/shape.h"

namespace dprun {

/// A small, mutex-guarded cache of per-shape state (primitives and their descriptors). Holds
/// at most kMaxEntries; adding one more drops them all.
template <class Value>
class ShapeCache {
 public:
  using Key = std::vector<int64_t>;
  static constexpr size_t kMaxEntries = 32;

  /// The value for `key`, made by make() when absent.
  template <class Make>
  std::shared_ptr<const Value> get(const Key& key, Make&& make) const {
    return get(key, std::forward<Make>(make), [] {});
  }
  /// The same, calling before_drop() (under the cache's lock) before full entries are dropped:
  /// for values that work queued on a device may still read (wait for the device there).
  template <class Make, class BeforeDrop>
  std::shared_ptr<const Value> get(const Key& key, Make&& make, BeforeDrop&& before_drop) const {
    {
      std::lock_guard lock(mutex_);
      auto it = entries_.find(key);
      if (it != entries_.end()) return it->second;
    }
    // Build outside the lock: primitive creation can be slow, and a duplicate is harmless.
    std::shared_ptr<const Value> value = make();
    std::lock_guard lock(mutex_);
    if (entries_.size() >= kMaxEntries && entries_.count(key) == 0) {
      before_drop();
      entries_.clear();
    }
    entries_.emplace(key, value);
    return value;
  }

 private:
  mutable std::mutex mutex_;
  mutable std::map<Key, std::shared_ptr<const Value>> entries_;
};

/// Concatenates shapes (with a separator) into one cache key.
inline std::vector<int64_t> shape_key(std::initializer_list<const Shape*> shapes) {
  std::vector<int64_t> key;
  for (const Shape* s : shapes) {
    if (s) key.insert(key.end(), s->begin(), s->end());
    key.push_back(-1);
  }
  return key;
}

}  // namespace dprun
