// HostBlockPool: freed blocks merge with their free neighbours and serve later requests of any
// size that fits (the smallest such block first), the used part grows only when none fits, and
// release_free gives the free memory back.
#include "engine/host_block_pool.h"

#include <gtest/gtest.h>

#include <cstring>

namespace dprun {
namespace {

constexpr size_t MiB = size_t{1} << 20;

struct Allocation {
  char* ptr;
  size_t held;
};

Allocation take(HostBlockPool& pool, size_t bytes) {
  size_t held = 0;
  auto* p = static_cast<char*>(pool.allocate(bytes, &held));
  EXPECT_NE(p, nullptr);
  std::memset(p, 0x5a, held);  // every byte of the block is the caller's to write
  return {p, held};
}

TEST(HostBlockPool, AFreedBlockMergesWithItsNeighboursAndServesALargerRequest) {
  HostBlockPool pool;
  const Allocation a = take(pool, 3 * MiB), b = take(pool, 5 * MiB), c = take(pool, 2 * MiB);
  EXPECT_EQ(b.ptr, a.ptr + 3 * MiB);  // carved one after another
  EXPECT_EQ(c.ptr, b.ptr + 5 * MiB);
  const size_t used = pool.used_bytes();
  pool.deallocate(a.ptr);
  pool.deallocate(b.ptr);
  const Allocation d = take(pool, 7 * MiB);  // fits only in a and b merged
  EXPECT_EQ(d.ptr, a.ptr);
  EXPECT_EQ(pool.used_bytes(), used);  // no growth
  EXPECT_EQ(pool.free_bytes(), used - 7 * MiB - 2 * MiB);
}

TEST(HostBlockPool, TheSmallestFreeBlockThatFitsIsTakenAndSplit) {
  HostBlockPool pool;
  const Allocation big = take(pool, 8 * MiB), keep1 = take(pool, MiB), small = take(pool, 4 * MiB),
                   keep2 = take(pool, MiB);
  pool.deallocate(big.ptr);
  pool.deallocate(small.ptr);
  const Allocation x = take(pool, 3 * MiB);
  EXPECT_EQ(x.ptr, small.ptr);
  EXPECT_EQ(x.held, 3 * MiB);  // split: the 1 MiB left is a block of the pool's
  const Allocation y = take(pool, MiB);
  EXPECT_EQ(y.ptr, small.ptr + 3 * MiB);
  (void)keep1, (void)keep2;
}

TEST(HostBlockPool, ARestSmallerThanABlockStaysWithTheBlock) {
  HostBlockPool pool;
  const Allocation a = take(pool, 3 * MiB + MiB / 2);  // the used part grows by 4 MiB
  EXPECT_EQ(a.held, 4 * MiB);
  EXPECT_EQ(pool.free_bytes(), 0u);
  EXPECT_EQ(pool.deallocate(a.ptr), 4 * MiB);
}

TEST(HostBlockPool, BlocksArePageMultiplesOnPages) {
  HostBlockPool pool;
  pool.deallocate(take(pool, 8 * MiB).ptr);
  const Allocation a = take(pool, MiB + 1);
  EXPECT_EQ(a.held, MiB + 4096);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(a.ptr) % 4096, 0u);
  const Allocation b = take(pool, MiB);
  EXPECT_EQ(b.ptr, a.ptr + MiB + 4096);
}

TEST(HostBlockPool, GrowingExtendsTheFreeBlockAtTheEnd) {
  HostBlockPool pool;
  const Allocation a = take(pool, MiB);  // the used part grows by 2 MiB: 1 MiB stays free
  EXPECT_EQ(pool.used_bytes(), 2 * MiB);
  const Allocation b = take(pool, 3 * MiB);  // the free MiB and 2 MiB more
  EXPECT_EQ(b.ptr, a.ptr + MiB);
  EXPECT_EQ(pool.used_bytes(), 4 * MiB);
  EXPECT_EQ(pool.free_bytes(), 0u);
}

TEST(HostBlockPool, ReleaseFreeShrinksTheUsedPartAndGivesPagesBack) {
  HostBlockPool pool;
  const Allocation a = take(pool, 4 * MiB), b = take(pool, 4 * MiB), c = take(pool, 4 * MiB);
  pool.deallocate(a.ptr);
  pool.deallocate(c.ptr);
  pool.release_free();
  EXPECT_EQ(pool.used_bytes(), 8 * MiB);  // c's block at the end is gone; a's stays, emptied
  EXPECT_EQ(pool.free_bytes(), 4 * MiB);
  const Allocation again = take(pool, 4 * MiB);
  EXPECT_EQ(again.ptr, a.ptr);
  pool.deallocate(again.ptr);
  pool.deallocate(b.ptr);
  pool.release_free();
  EXPECT_EQ(pool.used_bytes(), 0u);
  EXPECT_EQ(pool.free_bytes(), 0u);
  const Allocation fresh = take(pool, 2 * MiB);  // the range is reused from its start
  EXPECT_EQ(fresh.ptr, a.ptr);
}

}  // namespace
}  // namespace dprun
