#pragma once
// Host memory for large tensors, carved from one address range reserved for the pool: a freed
// block is merged with its free neighbours and serves any later request it fits, whatever size
// it was, and a request that no free block fits extends the range's used part (the free block
// at its end included). The caching allocator's per-size free lists keep each size's own peak,
// so a training step whose activations come in many sizes held their sum over sizes (ResNet-18:
// about 30% over the bytes ever in use at once); here what is held follows the bytes in use at
// once, plus the free gaps between blocks.
//
// Why not the system allocator: glibc maps blocks over its mmap threshold (32 MiB at most) anew
// and unmaps them on free, so every step would pay a page fault per 4 KiB of its large
// activations, and below it the heap's free top goes back to the system (M_TRIM_THRESHOLD):
// process-wide settings a library must not change. jemalloc's arenas would do this, but
// Debian's build replaces the process's malloc, which a library loaded into Python must not do.
//
// The range is reserved without access (PROT_NONE, which commits no memory); the used part is
// made accessible as it grows, and pages are touched only when a block is written.
//
// Not thread-safe: the caller (CachingHostAllocator) holds its lock around each call.
#include <cstddef>
#include <map>
#include <set>
#include <utility>

namespace dprun {

class HostBlockPool {
 public:
  /// Requests of at least this many bytes are the pool's; smaller ones stay in size classes.
  static constexpr size_t kMinBlock = size_t{1} << 20;

  HostBlockPool() = default;
  HostBlockPool(const HostBlockPool&) = delete;
  HostBlockPool& operator=(const HostBlockPool&) = delete;
  /// Unmaps the range, blocks in use or not.
  ~HostBlockPool();

  /// A page-aligned block of at least `bytes` (>= kMinBlock): the smallest free one that fits,
  /// split when what remains is a block of the pool's, or the range's used part extended.
  /// nullptr when the range is used up or the system refuses its memory. `*held` is set to the
  /// block's size.
  void* allocate(size_t bytes, size_t* held);
  /// Returns a block from allocate(); returns its size.
  size_t deallocate(void* ptr);
  /// Gives the pages of every free block back to the system (they are touched anew when
  /// reused) and shrinks the used part by the free block at its end.
  void release_free();

  /// Bytes in free blocks of the used part.
  size_t free_bytes() const { return free_bytes_; }
  /// Bytes of the range in use or kept free.
  size_t used_bytes() const { return used_; }

 private:
  struct Block {
    size_t size;
    bool free;
  };
  using Blocks = std::map<char*, Block>;  // by address: a block's neighbours are beside it

  // Reserves the range on first use: twice the machine's memory, so that no request the
  // machine could hold finds it too small.
  bool reserve();
  // Extends the used part by at least `bytes` as one free block merged with a free block at its
  // end; false when the range or the system has no room.
  bool grow(size_t bytes);
  void mark_free(Blocks::iterator it);
  void unmark_free(Blocks::iterator it);

  char* base_ = nullptr;
  size_t reserved_ = 0;
  size_t used_ = 0;  // [base_, base_ + used_) is accessible and tiled by blocks_
  Blocks blocks_;
  std::set<std::pair<size_t, char*>> free_by_size_;  // best fit: the first of size >= asked
  size_t free_bytes_ = 0;
};

}  // namespace dprun
