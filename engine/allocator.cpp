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
  size_t cls = size_class(bytes);
  {
    std::lock_guard lock(mutex_);
    stats_.in_use += cls;
    if (stats_.in_use > stats_.peak_in_use) stats_.peak_in_use = stats_.in_use;
    auto it = free_blocks_.find(cls);
    if (it != free_blocks_.end() && !it->second.empty()) {
      void* p = it->second.back();
      it->second.pop_back();
      stats_.cached -= cls;
      return p;
    }
  }
  void* p = std::aligned_alloc(kAlignment, cls);
  if (p == nullptr) {
    std::lock_guard lock(mutex_);
    stats_.in_use -= cls;
    fail("out of memory on ", device_.to_string(), " allocating ", bytes, " bytes");
  }
  return p;
}

void CachingHostAllocator::deallocate(void* ptr, size_t bytes) {
  if (ptr == nullptr) return;
  size_t cls = size_class(bytes);
  std::lock_guard lock(mutex_);
  stats_.in_use -= cls;
  stats_.cached += cls;
  free_blocks_[cls].push_back(ptr);
}

AllocatorStats CachingHostAllocator::stats() const {
  std::lock_guard lock(mutex_);
  return stats_;
}

void CachingHostAllocator::release_cached() {
  std::lock_guard lock(mutex_);
  for (auto& [cls, blocks] : free_blocks_)
    for (void* p : blocks) std::free(p);
  free_blocks_.clear();
  stats_.cached = 0;
}

}  // namespace dprun
