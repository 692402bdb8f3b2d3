// Ranks of one host: their places (local_ranks, ranks as threads all share this host) and the
// block of the host's devices each takes (local_share).
#include <gtest/gtest.h>

#include "engine/distributed/local_ranks.h"
#include "error_test_util.h"
#include "thread_ranks.h"

namespace dprun {
namespace {

std::vector<Device> gpus(int n) {
  std::vector<Device> out;
  for (int i = 0; i < n; ++i) out.push_back(Device::cuda(i));
  return out;
}

TEST(LocalRanks, RanksOfOneHostAreNumberedInRankOrder) {
  std::vector<LocalRanks> seen(3);
  auto errors = testing::run_ranks(
      3, [&](ProcessGroup& g) { seen[static_cast<size_t>(g.rank())] = local_ranks(g); });
  EXPECT_EQ(errors, std::vector<std::string>(3));
  for (int r = 0; r < 3; ++r) {
    EXPECT_EQ(seen[static_cast<size_t>(r)].rank, r);
    EXPECT_EQ(seen[static_cast<size_t>(r)].size, 3);
  }
}

TEST(LocalShare, EachRankTakesABlockOfItsOwn) {
  EXPECT_EQ(local_share(gpus(4), {0, 2}), (std::vector<Device>{Device::cuda(0), Device::cuda(1)}));
  EXPECT_EQ(local_share(gpus(4), {1, 2}), (std::vector<Device>{Device::cuda(2), Device::cuda(3)}));
  // 3 GPUs over 2 ranks: blocks [0, 1) and [1, 3).
  EXPECT_EQ(local_share(gpus(3), {0, 2}), (std::vector<Device>{Device::cuda(0)}));
  EXPECT_EQ(local_share(gpus(3), {1, 2}), (std::vector<Device>{Device::cuda(1), Device::cuda(2)}));
  for (int r = 0; r < 8; ++r)
    EXPECT_EQ(local_share(gpus(8), {r, 8}), (std::vector<Device>{Device::cuda(r)}));
  EXPECT_EQ(local_share(gpus(2), {0, 1}), gpus(2));
}

TEST(LocalShare, MoreRanksThanDevicesIsAnError) {
  EXPECT_EQ(testing::error_of([] {
              local_share(gpus(2), {2, 3});
            }),
            "3 ranks on this host share 2 devices (cuda:0,cuda:1): each rank needs one of its "
            "own; name them with --devices");
}

}  // namespace
}  // namespace dprun
