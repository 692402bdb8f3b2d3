#include "engine/host_block_pool.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <iterator>

namespace dprun {

namespace {
// Blocks start and end on pages, so that a block's pages are its own to touch first and to give
// back.
constexpr size_t kPage = 4096;
// The used part grows by at least this much, so that a run of small growths costs few calls.
constexpr size_t kGrowth = size_t{2} << 20;

size_t round_up(size_t bytes, size_t multiple) {
  return (bytes + multiple - 1) / multiple * multiple;
}
}  // namespace

HostBlockPool::~HostBlockPool() {
  if (base_ != nullptr) munmap(base_, reserved_);
}

bool HostBlockPool::reserve() {
  const long pages = sysconf(_SC_PHYS_PAGES);
  const size_t memory = pages > 0 ? static_cast<size_t>(pages) * kPage : size_t{64} << 30;
  const size_t bytes = round_up(2 * memory, size_t{1} << 30);
  void* p = mmap(nullptr, bytes, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) return false;
  base_ = static_cast<char*>(p);
  reserved_ = bytes;
  return true;
}

bool HostBlockPool::grow(size_t bytes) {
  if (base_ == nullptr && !reserve()) return false;
  // A free block at the end is extended instead of left beside the new one.
  size_t tail_free = 0;
  if (!blocks_.empty() && std::prev(blocks_.end())->second.free)
    tail_free = std::prev(blocks_.end())->second.size;
  const size_t extra = round_up(std::max(bytes - std::min(bytes, tail_free), kGrowth), kGrowth);
  if (extra > reserved_ - used_) return false;
  if (mprotect(base_ + used_, extra, PROT_READ | PROT_WRITE) != 0) return false;
  char* start = base_ + used_;
  used_ += extra;
  if (tail_free > 0) {
    const auto tail = std::prev(blocks_.end());
    unmark_free(tail);
    tail->second.size += extra;
    mark_free(tail);
  } else {
    mark_free(blocks_.emplace(start, Block{extra, false}).first);
  }
  return true;
}

void HostBlockPool::mark_free(Blocks::iterator it) {
  it->second.free = true;
  free_by_size_.emplace(it->second.size, it->first);
  free_bytes_ += it->second.size;
}

void HostBlockPool::unmark_free(Blocks::iterator it) {
  it->second.free = false;
  free_by_size_.erase({it->second.size, it->first});
  free_bytes_ -= it->second.size;
}

void* HostBlockPool::allocate(size_t bytes, size_t* held) {
  const size_t size = round_up(bytes, kPage);
  auto fit = free_by_size_.lower_bound({size, nullptr});
  if (fit == free_by_size_.end()) {
    if (!grow(size)) return nullptr;
    fit = free_by_size_.lower_bound({size, nullptr});
  }
  const auto it = blocks_.find(fit->second);
  unmark_free(it);
  Block& block = it->second;
  // Split off the rest when it can serve a request of the pool; a smaller rest stays with the
  // block (less than kMinBlock wasted while it is in use).
  if (block.size - size >= kMinBlock) {
    mark_free(blocks_.emplace(it->first + size, Block{block.size - size, false}).first);
    block.size = size;
  }
  *held = block.size;
  return it->first;
}

size_t HostBlockPool::deallocate(void* ptr) {
  auto it = blocks_.find(static_cast<char*>(ptr));
  const size_t size = it->second.size;
  const auto next = std::next(it);
  if (next != blocks_.end() && next->second.free) {
    unmark_free(next);
    it->second.size += next->second.size;
    blocks_.erase(next);
  }
  if (it != blocks_.begin()) {
    const auto prev = std::prev(it);
    if (prev->second.free) {
      unmark_free(prev);
      prev->second.size += it->second.size;
      blocks_.erase(it);
      it = prev;
    }
  }
  mark_free(it);
  return size;
}

void HostBlockPool::release_free() {
  if (!blocks_.empty() && std::prev(blocks_.end())->second.free) {
    const auto tail = std::prev(blocks_.end());
    const size_t size = tail->second.size;
    unmark_free(tail);
    blocks_.erase(tail);
    used_ -= size;
    // Without access again, and its pages dropped.
    mmap(base_ + used_, size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED,
         -1, 0);
  }
  for (const auto& [start, block] : blocks_)
    if (block.free) madvise(start, block.size, MADV_DONTNEED);
}

}  // namespace dprun
