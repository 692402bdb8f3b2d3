#pragma once
// Device memory allocators.
#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <vector>

#include "engine/device.h"
#include "engine/host_block_pool.h"

namespace dprun {

/// Statistics of a caching allocator, in bytes.
struct AllocatorStats {
  size_t in_use = 0;       // handed out and not yet returned
  size_t peak_in_use = 0;  // maximum of in_use since creation
  size_t cached = 0;       // returned blocks kept for reuse
};

/// Allocates device memory. Implementations are thread-safe.
class Allocator {
 public:
  virtual ~Allocator() = default;
  /// Returns memory for `bytes` bytes (64-byte aligned); throws Error when out of memory.
  virtual void* allocate(size_t bytes) = 0;
  /// Returns memory obtained from allocate(bytes) with the same size.
  virtual void deallocate(void* ptr, size_t bytes) = 0;
  virtual Device device() const = 0;
  /// Bytes in use, their peak and the cache; zeros where the allocator does not count.
  virtual AllocatorStats stats() const { return {}; }
  /// Gives the memory kept for reuse back to the system; nothing where none is kept.
  virtual void release_cached() {}
};

/// A host-memory allocator that keeps what is freed for reuse, so repeated runs of a plan reuse
/// the same memory instead of going back to the system allocator: blocks under
/// HostBlockPool::kMinBlock in per-size free lists (rounded up to a size class, powers of two
/// split in four, to raise reuse), larger ones in a HostBlockPool, where a freed block serves
/// any later request it fits.
class CachingHostAllocator : public Allocator {
 public:
  explicit CachingHostAllocator(Device device) : device_(device) {}
  ~CachingHostAllocator() override;
  void* allocate(size_t bytes) override;
  void deallocate(void* ptr, size_t bytes) override;
  Device device() const override { return device_; }
  AllocatorStats stats() const override;
  /// Frees every cached block back to the system (the pool's segments that hold no block in
  /// use).
  void release_cached() override;

  /// The size class a request of `bytes` is rounded up to.
  static size_t size_class(size_t bytes);

 private:
  Device device_;
  mutable std::mutex mutex_;
  std::map<size_t, std::vector<void*>> free_blocks_;  // small blocks by size class
  HostBlockPool large_;
  size_t small_cached_ = 0;  // bytes in free_blocks_
  AllocatorStats stats_;
};

}  // namespace dprun
