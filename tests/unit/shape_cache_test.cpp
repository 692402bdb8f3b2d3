// ShapeCache (ops/common/shape_cache.h): a value is made once per key until the cache is full;
// the next new key drops every entry, after the caller's before_drop.
#include <gtest/gtest.h>

#include <cstdint>
#include <memory>

#include "ops/common/shape_cache.h"

namespace dprun {
namespace {

TEST(ShapeCache, MakesEachKeyOnceAndDropsEverythingWhenFullAfterBeforeDrop) {
  ShapeCache<int64_t> cache;
  int made = 0, drops = 0;
  auto get = [&](int64_t key) {
    return *cache.get(
        {key}, [&] { return std::make_shared<int64_t>(++made * 100 + key); }, [&] { ++drops; });
  };
  constexpr auto full = static_cast<int64_t>(ShapeCache<int64_t>::kMaxEntries);
  for (int64_t key = 0; key < full; ++key) EXPECT_EQ(get(key), (key + 1) * 100 + key);
  for (int64_t key = 0; key < full; ++key) EXPECT_EQ(get(key), (key + 1) * 100 + key);
  EXPECT_EQ(made, full);
  EXPECT_EQ(drops, 0);
  EXPECT_EQ(get(full), (full + 1) * 100 + full);  // one more: everything else is dropped
  EXPECT_EQ(drops, 1);
  EXPECT_EQ(get(full), (full + 1) * 100 + full);
  EXPECT_EQ(get(0), (full + 2) * 100);  // made again
  EXPECT_EQ(made, full + 2);
  EXPECT_EQ(drops, 1);
}

}  // namespace
}  // namespace dprun
