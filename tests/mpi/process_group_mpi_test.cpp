// The MPI process group, run by ctest under mpirun (every rank runs every test, in order).
#include <gtest/gtest.h>
#include <sched.h>

#include <chrono>
#include <cstring>
#include <random>
#include <thread>

#include "engine/distributed/host_cores.h"
#include "engine/distributed/mpi_process_group.h"
#include "engine/distributed/rank_agreement.h"
#include "engine/distributed/rank_failure.h"
#include "engine/distributed/wait_clock.h"
#include "engine/parallel/comm.h"

namespace dprun {
namespace {

ProcessGroup& world() {
  static std::shared_ptr<ProcessGroup> group = mpi_world_process_group({.timeout_seconds = 60});
  return *group;
}

// Rank r's tensor of `n` values: the same on every rank that asks for it.
template <class T>
Tensor values_of_rank(int rank, int64_t n) {
  std::mt19937 rng(static_cast<uint32_t>(1000 * rank + n));
  std::uniform_real_distribution<T> dist(-1000, 1000);
  std::vector<T> v(static_cast<size_t>(n));
  for (auto& x : v) x = dist(rng);
  return Tensor::from_vector<T>({n}, v);
}

bool same_bytes(const Tensor& a, const Tensor& b) {
  return a.nbytes() == b.nbytes() && std::memcmp(a.raw_data(), b.raw_data(), a.nbytes()) == 0;
}

TEST(MpiProcessGroup, IsTheWholeJob) {
  EXPECT_EQ(world().backend(), "mpi");
  EXPECT_GE(world().size(), 2);
  auto ranks = all_gather_values<int32_t>(world(), world().rank());
  for (int r = 0; r < world().size(); ++r) EXPECT_EQ(ranks[static_cast<size_t>(r)], r);
}

template <class T>
void check_rank_order(int64_t n) {
  std::vector<Tensor> parts;
  for (int r = 0; r < world().size(); ++r) parts.push_back(values_of_rank<T>(r, n));
  Tensor expected = reduce_add(parts, Device::cpu(0));
  Tensor mine = values_of_rank<T>(world().rank(), n);
  all_reduce_sum_now(world(), mine, ReduceOrder::RankOrder);
  EXPECT_TRUE(same_bytes(mine, expected)) << n << " values of " << dtype_name(mine.dtype());
}

TEST(MpiProcessGroup, RankOrderEqualsReduceAddBitForBit) {
  // Fewer values than ranks, sizes that do not divide by the ranks, and a large one.
  for (int64_t n : {1, 2, 7, 1000, 100003}) {
    check_rank_order<float>(n);
    check_rank_order<double>(n);
  }
}

TEST(MpiProcessGroup, AnyOrderIsTheSameOnEveryRankAndCloseToRankOrder) {
  const int64_t n = 4099;
  std::vector<Tensor> parts;
  for (int r = 0; r < world().size(); ++r) parts.push_back(values_of_rank<float>(r, n));
  Tensor ordered = reduce_add(parts, Device::cpu(0));
  Tensor mine = values_of_rank<float>(world().rank(), n);
  all_reduce_sum_now(world(), mine, ReduceOrder::Any);
  for (int64_t i = 0; i < n; ++i)
    ASSERT_NEAR(mine.data<float>()[i], ordered.data<float>()[i], 1e-3) << i;
  uint64_t sum = 0;
  std::memcpy(&sum, mine.raw_data(), sizeof(sum));
  auto all = all_gather_values<uint64_t>(world(), sum);
  for (uint64_t s : all) EXPECT_EQ(s, all[0]);
}

// Rank r's `n` values in 16 bits (compressed gradients, DistributedOptions::
// gradient_compression).
template <class Half>
Tensor half_values_of_rank(int rank, int64_t n) {
  Tensor wide = values_of_rank<float>(rank, n);
  Tensor out = Tensor::empty({n}, dtype_of<Half>());
  for (int64_t i = 0; i < n; ++i) out.data<Half>()[i] = Half(wide.data<float>()[i] / 100);
  return out;
}

// MPI has no 16-bit floats: they travel as 16-bit words and the group sums them with its own
// operation, each partial sum in float rounded to 16 bits. In rank order that is every rank's
// value added in turn; in MPI's order every rank gets the same sum, near the exact one.
template <class Half>
void check_16bit_sums(int64_t n) {
  SCOPED_TRACE(std::string(dtype_name(dtype_of<Half>())) + ", " + std::to_string(n) + " values");
  Tensor ordered = half_values_of_rank<Half>(0, n);
  std::vector<double> exact(static_cast<size_t>(n));
  for (int r = 0; r < world().size(); ++r) {
    Tensor part = half_values_of_rank<Half>(r, n);
    for (int64_t i = 0; i < n; ++i) {
      exact[static_cast<size_t>(i)] += static_cast<float>(part.data<Half>()[i]);
      if (r > 0)
        ordered.data<Half>()[i] = Half(static_cast<float>(ordered.data<Half>()[i]) +
                                       static_cast<float>(part.data<Half>()[i]));
    }
  }
  Tensor mine = half_values_of_rank<Half>(world().rank(), n);
  all_reduce_sum_now(world(), mine, ReduceOrder::RankOrder);
  EXPECT_TRUE(same_bytes(mine, ordered));

  mine = half_values_of_rank<Half>(world().rank(), n);
  all_reduce_sum_now(world(), mine, ReduceOrder::Any);
  // Each of the ranks - 1 partial sums is rounded once, by at most half a unit in the last
  // place: 2^-8 (bfloat16) or 2^-11 (float16) of its magnitude, below 10 per rank.
  const double step = dtype_of<Half>() == DType::BFloat16 ? 1.0 / 256 : 1.0 / 2048;
  const double bound = (world().size() - 1) * (10.0 * world().size()) * step;
  for (int64_t i = 0; i < n; ++i)
    ASSERT_NEAR(static_cast<float>(mine.data<Half>()[i]), exact[static_cast<size_t>(i)], bound)
        << i;
  uint64_t check = 0;
  for (int64_t i = 0; i < n; ++i)
    check = check * 31 + static_cast<uint16_t>(mine.data<Half>()[i].bits);
  auto all = all_gather_values<uint64_t>(world(), check);
  for (uint64_t c : all) EXPECT_EQ(c, all[0]);
}

TEST(MpiProcessGroup, SixteenBitSumsUseTheGroupsOwnOperation) {
  for (int64_t n : {1, 7, 1000, 65537}) {
    check_16bit_sums<Float16>(n);
    check_16bit_sums<BFloat16>(n);
  }
}

TEST(MpiProcessGroup, ControlCollectivesRunWhileAllReducesAreInFlight) {
  // Start several all-reduces of both orders, exchange on the control channel, then wait in
  // reverse order: the channels are matched separately.
  std::vector<Tensor> tensors;
  std::vector<std::unique_ptr<CollectiveWork>> works;
  for (int k = 0; k < 6; ++k) {
    tensors.push_back(values_of_rank<float>(world().rank(), 100 + k));
    works.push_back(
        world().all_reduce_sum(tensors.back(), k % 2 ? ReduceOrder::RankOrder : ReduceOrder::Any));
  }
  auto ranks = all_gather_values<int32_t>(world(), world().rank());
  EXPECT_EQ(static_cast<int>(ranks.size()), world().size());
  for (int k = 5; k >= 0; --k) works[static_cast<size_t>(k)]->wait();
  for (int k = 1; k < 6; k += 2) {
    std::vector<Tensor> parts;
    for (int r = 0; r < world().size(); ++r) parts.push_back(values_of_rank<float>(r, 100 + k));
    EXPECT_TRUE(same_bytes(tensors[static_cast<size_t>(k)], reduce_add(parts, Device::cpu(0))));
  }
}

TEST(MpiProcessGroup, BroadcastGatherBarrier) {
  int root = world().size() - 1;
  Tensor t = Tensor::from_vector<int64_t>({3}, {world().rank(), 7, -1});
  world().broadcast(t, root);
  EXPECT_EQ(t.data<int64_t>()[0], root);
  std::vector<uint8_t> mine(static_cast<size_t>(world().rank()),
                            static_cast<uint8_t>(world().rank()));
  auto gathered = world().gather(mine, 0);
  if (world().rank() == 0) {
    ASSERT_EQ(static_cast<int>(gathered.size()), world().size());
    for (int r = 0; r < world().size(); ++r)
      EXPECT_EQ(gathered[static_cast<size_t>(r)],
                std::vector<uint8_t>(static_cast<size_t>(r), static_cast<uint8_t>(r)));
  } else {
    EXPECT_TRUE(gathered.empty());
  }
  auto names = all_gather_strings(world(), std::string(static_cast<size_t>(world().rank()), 'x'));
  for (int r = 0; r < world().size(); ++r)
    EXPECT_EQ(names[static_cast<size_t>(r)], std::string(static_cast<size_t>(r), 'x'));
  world().barrier();
}

// A rank that is late past the timeout is named by the ranks that waited for it, with the
// stage the collective belongs to; when it arrives, its own wait completes (it does not blame
// the others). Runs on a group of its own, whose barrier the others leave pending.
TEST(MpiProcessGroup, ARankLatePastTheTimeoutIsNamedByTheOthers) {
  auto group = mpi_world_process_group({.timeout_seconds = 1});
  group->set_stage("of step 3");
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  if (group->rank() == 1) {
    std::this_thread::sleep_for(std::chrono::milliseconds(3500));
    EXPECT_NO_THROW(group->barrier());  // the others' barriers are still posted
  } else {
    try {
      group->barrier();
      ADD_FAILURE() << "the barrier completed without rank 1";
    } catch (const Error& e) {
      EXPECT_STREQ(e.what(), "rank 1 did not join the barrier of step 3 within 1 s");
    }
    // The timeout, then up to 1 s (the timeout) for the others' answers.
    const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
    EXPECT_GE(seconds, 1.0);
    EXPECT_LT(seconds, 3.0);
  }
  world().barrier();  // progresses the late barrier on every rank
}

// A gap of more than a second between two looks at the clock is time the process was stopped,
// not time it waited: a rank resumed after SIGSTOP does not count it against the others.
TEST(WaitClock, CountsAStopAsStoppedNotWaited) {
  WaitClock clock;
  const auto start = clock.last;
  clock.tick(start + std::chrono::milliseconds(400));
  clock.tick(start + std::chrono::milliseconds(900));
  clock.tick(start + std::chrono::milliseconds(4900));  // stopped for 4 s
  clock.tick(start + std::chrono::milliseconds(5000));
  EXPECT_NEAR(clock.waited, 1.0, 1e-9);
  EXPECT_NEAR(clock.stopped, 4.0, 1e-9);
}

// check_ranks_agree: equal facts pass; a difference throws the same message on every rank.
TEST(MpiProcessGroup, RanksAgreeOrNameTheFirstDifference) {
  const int me = world().rank();
  EXPECT_NO_THROW(check_ranks_agree(world(), {{"--batch", "", "8"}, {"the model", "w", "[2]"}}));
  std::string expected = "ranks disagree on --lr: rank 0 has 0.1, ";
  expected += world().size() == 2 ? "rank 1 has 0.2" : "ranks 1";
  for (int r = 2; r < world().size(); ++r) expected += ", " + std::to_string(r);
  if (world().size() > 2) expected += " have 0.2";
  try {
    check_ranks_agree(world(), {{"--batch", "", "8"}, {"--lr", "", me == 0 ? "0.1" : "0.2"}});
    ADD_FAILURE() << "no error";
  } catch (const CollectiveError& e) {
    EXPECT_EQ(std::string(e.what()), expected);
  }
  try {
    check_ranks_agree(world(), {{"the model", "parameter 'w'", me == 1 ? "[3]" : "[2]"}});
    ADD_FAILURE() << "no error";
  } catch (const CollectiveError& e) {
    const std::string message =
        world().size() == 2
            ? "ranks disagree on the model: parameter 'w' is [2] on rank 0 and [3] on rank 1"
            : "ranks disagree on the model: parameter 'w' is [2] on ranks 0, 2 and [3] on rank 1";
    if (world().size() <= 3) {
      EXPECT_EQ(std::string(e.what()), message);
    }
  }
}

std::vector<int> affinity() {
  cpu_set_t set;
  CPU_ZERO(&set);
  sched_getaffinity(0, sizeof(set), &set);
  std::vector<int> cpus;
  for (int c = 0; c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, &set)) cpus.push_back(c);
  return cpus;
}

std::string listed(const std::vector<int>& cpus) {
  std::string out;
  for (int c : cpus) out += std::to_string(c) + " ";
  return out;
}

TEST(MpiProcessGroup, RanksOnAHostShareItsCores) {
  // Every rank of this test runs on one host.
  std::vector<int> before = affinity();
  auto masks = all_gather_strings(world(), listed(before));
  bool same = true;
  for (const auto& m : masks) same &= m == masks[0];
  std::vector<int> expected = before;
  if (same && world().size() > 1) {
    auto cores = static_cast<int>(before.size()), count = world().size(), l = world().rank();
    if (count >= cores)
      expected = {before[static_cast<size_t>(l % cores)]};
    else
      expected.assign(before.begin() + l * cores / count, before.begin() + (l + 1) * cores / count);
  }
  std::vector<int> share = share_host_cores(world(), local_ranks(world()));
  EXPECT_EQ(share, expected);
  EXPECT_EQ(affinity(), expected);
}

}  // namespace
}  // namespace dprun
