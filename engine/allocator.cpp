#include "engine/allocator.h"

#include <algorithm>
#include <bit>
#include <cstdlib>
#include <new>

#include "engine/error.h"

namespace dprun {

namespace {
constexpr size_t kAlignment = 64;
}

size_t CachingHostAllocator::size_class(size_t bytes) {
  if (bytes <= kAlignment) return kAlignment;
  // Four classes per power of two keeps the rounding waste under 25%; every class is a
  // multiple of the alignment, as aligned_alloc requires of the size it is given.
  const size_t power = std::bit_floor(bytes);
  const size_t step = std::max(power / 4, kAlignment);
  return (bytes + step - 1) / step * step;
}

CachingHostAllocator::~CachingHostAllocator() {
  release_cached();
}

void* CachingHostAllocator::allocate(size_t bytes) {
  const size_t cls = size_class(bytes);
  void* p = nullptr;
  size_t held = cls;
  {
    std::lock_guard lock(mutex_);
    if (cls >= HostBlockPool::kMinBlock) {
      p = large_.allocate(bytes, &held);  // no size class: the pool wastes less
    } else if (auto it = free_blocks_.find(cls); it != free_blocks_.end() && !it->second.empty()) {
      p = it->second.back();
      it->second.pop_back();
      small_cached_ -= cls;
    } else {
      p = std::aligned_alloc(kAlignment, cls);
    }
    if (p != nullptr) {
      stats_.in_use += held;
      stats_.peak_in_use = std::max(stats_.peak_in_use, stats_.in_use);
    }
  }
  if (p == nullptr) fail("out of memory on ", device_.to_string(), " allocating ", bytes, " bytes");
  return p;
}

void CachingHostAllocator::deallocate(void* ptr, size_t bytes) {
  if (ptr == nullptr) return;
  const size_t cls = size_class(bytes);
  std::lock_guard lock(mutex_);
  if (cls >= HostBlockPool::kMinBlock) {
    stats_.in_use -= large_.deallocate(ptr);
  } else {
    stats_.in_use -= cls;
    small_cached_ += cls;
    free_blocks_[cls].push_back(ptr);
  }
}

AllocatorStats CachingHostAllocator::stats() const {
  std::lock_guard lock(mutex_);
  AllocatorStats stats = stats_;
  stats.cached = small_cached_ + large_.free_bytes();
  return stats;
}

void CachingHostAllocator::release_cached() {
  std::lock_guard lock(mutex_);
  for (auto& [cls, blocks] : free_blocks_)
    for (void* p : blocks) std::free(p);
  free_blocks_.clear();
  small_cached_ = 0;
  large_.release_free();
}

}  // namespace dprun
