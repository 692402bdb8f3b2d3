// Process groups whose ranks are threads, rank failures, DistributedSampler shards, and the
// gradient Reducer's buckets.
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <thread>

#include "accelerator_test_util.h"
#include "engine/backend.h"
#include "engine/distributed/nccl_process_group.h"
#include "engine/distributed/reducer.h"
#include "engine/parallel/comm.h"
#include "engine/training/distributed_data_parallel.h"
#include "error_test_util.h"
#include "recording_group.h"
#include "thread_ranks.h"

namespace dprun {
namespace {

using testing::RecordingGroup;
using testing::run_ranks;

std::vector<float> values_of(const Tensor& t) {
  return std::vector<float>(t.data<float>(), t.data<float>() + t.numel());
}

TEST(ThreadProcessGroup, OneRankIsItsOwnJob) {
  auto group = make_thread_process_groups(1)[0];
  EXPECT_EQ(group->rank(), 0);
  EXPECT_EQ(group->size(), 1);
  EXPECT_EQ(group->backend(), "threads");
  Tensor t = Tensor::from_vector<float>({3}, {1.5f, -2.0f, 4.0f});
  all_reduce_sum_now(*group, t, ReduceOrder::Any);
  EXPECT_EQ(values_of(t), (std::vector<float>{1.5f, -2.0f, 4.0f}));
  group->broadcast(t, 0);
  EXPECT_EQ(values_of(t), (std::vector<float>{1.5f, -2.0f, 4.0f}));
  EXPECT_EQ(all_gather_values<int64_t>(*group, 7), (std::vector<int64_t>{7}));
  std::vector<uint8_t> bytes{1, 2, 3};
  auto gathered = group->gather(bytes, 0);
  ASSERT_EQ(gathered.size(), 1u);
  EXPECT_EQ(gathered[0], bytes);
  group->barrier();
}

TEST(ThreadProcessGroup, SumsInRankOrderLikeReduceAdd) {
  // 1e8 + 1 rounds back to 1e8 in float32, so only the rank order gives 0 for element 0:
  // ((1e8 + 1) - 1e8) = 0, where (1e8 - 1e8) + 1 would give 1.
  const std::vector<std::vector<float>> parts = {
      {1e8f, 0.1f, 3.0f}, {1.0f, 0.2f, -1.0f}, {-1e8f, 0.3f, 0.5f}};
  std::vector<Tensor> inputs;
  for (const auto& p : parts) inputs.push_back(Tensor::from_vector<float>({3}, p));
  std::vector<float> expected = values_of(reduce_add(inputs, Device::cpu(0)));
  ASSERT_EQ(expected[0], 0.0f);
  std::vector<std::vector<float>> results(3);
  auto errors = run_ranks(3, [&](ProcessGroup& g) {
    Tensor t = Tensor::from_vector<float>({3}, parts[static_cast<size_t>(g.rank())]);
    auto work = g.all_reduce_sum(t, ReduceOrder::RankOrder);
    work->wait();
    EXPECT_TRUE(work->test());
    results[static_cast<size_t>(g.rank())] = values_of(t);
  });
  EXPECT_EQ(errors, (std::vector<std::string>(3)));
  for (const auto& r : results) EXPECT_EQ(r, expected);
}

TEST(ThreadProcessGroup, SumsInEachRanksDeviceMemory) {
  // Rank r sums in sim:r, in rank order as on the host (element 0 cancels only in that order).
  const std::vector<std::vector<float>> parts = {{1e8f, 0.5f}, {1.0f, 0.25f}, {-1e8f, 2.0f}};
  std::vector<std::vector<float>> results(3);
  std::vector<Device> devices(3);
  auto errors = run_ranks(3,
                          [&](ProcessGroup& g) {
                            const auto r = static_cast<size_t>(g.rank());
                            const Device mine = Device::sim(g.rank());
                            EXPECT_EQ(g.reduce_device(), mine);
                            Tensor t = Tensor::from_vector<float>({2}, parts[r]).to(mine);
                            all_reduce_sum_now(g, t, ReduceOrder::Any);
                            devices[r] = t.device();
                            results[r] = values_of(t.to(Device::cpu()));
                          },
                          {}, {Device::sim(0), Device::sim(1), Device::sim(2)});
  EXPECT_EQ(errors, (std::vector<std::string>(3)));
  for (int r = 0; r < 3; ++r) {
    EXPECT_EQ(results[static_cast<size_t>(r)], (std::vector<float>{0.0f, 2.75f})) << "rank " << r;
    EXPECT_EQ(devices[static_cast<size_t>(r)], Device::sim(r));
  }
}

TEST(ThreadProcessGroup, BroadcastsInEachRanksDeviceMemory) {
  // One tensor, then a device and a host tensor together (broadcast_coalesced), from rank 1.
  std::vector<std::vector<int64_t>> results(2);
  auto values = [](const Tensor& t) {
    const Tensor host = t.to(Device::cpu());
    return std::vector<int64_t>(host.data<int64_t>(), host.data<int64_t>() + host.numel());
  };
  auto errors = run_ranks(
      2,
      [&](ProcessGroup& g) {
        const int64_t r = g.rank();
        Tensor t = Tensor::from_vector<int64_t>({3}, {r, 10 + r, -7 * r}).to(Device::sim(g.rank()));
        g.broadcast(t, 1);
        Tensor on_device = Tensor::from_vector<int64_t>({1}, {100 * r}).to(Device::sim(g.rank()));
        Tensor on_host = Tensor::from_vector<int64_t>({2}, {r, -r});
        g.broadcast_coalesced({on_device, on_host}, 1);
        auto& out = results[static_cast<size_t>(r)];
        for (const Tensor& each : {t, on_device, on_host})
          for (int64_t v : values(each)) out.push_back(v);
      },
      {}, {Device::sim(0), Device::sim(1)});
  EXPECT_EQ(errors, (std::vector<std::string>(2)));
  for (const auto& r : results) EXPECT_EQ(r, (std::vector<int64_t>{1, 11, -7, 100, 1, -1}));
}

TEST(ThreadProcessGroup, RefusesTensorsOutsideItsMemory) {
  auto device_group = make_thread_process_groups(1, {}, {Device::sim(0)})[0];
  EXPECT_EQ(testing::error_of([&] {
              device_group->all_reduce_sum(Tensor::zeros({2}, DType::Float32), ReduceOrder::Any);
            }),
            "all_reduce_sum: the tensor must be in sim:0's memory, not float32[2] on cpu:0");
  auto host_group = make_thread_process_groups(1)[0];
  EXPECT_EQ(testing::error_of([&] {
              host_group->all_reduce_sum(Tensor::zeros({2}, DType::Float32, Device::sim(0)),
                                         ReduceOrder::Any);
            }),
            "all_reduce_sum: the tensor must be in host memory, not float32[2] on sim:0");
  EXPECT_EQ(testing::error_of([&] {
              device_group->broadcast(Tensor::zeros({2}, DType::Float32, Device::sim(1)), 0);
            }),
            "broadcast: the tensor must be in host memory or sim:0's, not float32[2] on sim:1");
  EXPECT_EQ(testing::error_of([] { make_thread_process_groups(2, {}, {Device::sim(0)}); }),
            "a process group of 2 ranks given 1 devices to sum in");
}

// The NCCL group's checks come before NCCL is touched, so these run without a GPU.
const char* const kNoNccl = "this build of dprun has no CUDA support, so no NCCL process group";

TEST(NcclProcessGroup, EveryRankNeedsAGpu) {
  // Rank 1's device is the host: both ranks fail together, naming it.
  std::vector<Device> devices = {Device::cuda(0), Device::cpu(0)};
  auto errors = run_ranks(2, [&](ProcessGroup& g) {
    auto bootstrap = std::shared_ptr<ProcessGroup>(&g, [](ProcessGroup*) {});
    nccl_process_group(bootstrap, devices[static_cast<size_t>(g.rank())]);
  });
  if (!nccl_supported()) {
    EXPECT_EQ(errors, std::vector<std::string>(2, kNoNccl));
    return;
  }
  // Without a GPU, rank 0's cuda:0 is refused as well.
  const std::string rank1 =
      "rank 1: NCCL process group: cpu:0 is not a GPU; NCCL sums in the memory of a GPU (cuda:N)";
  const std::string expected = backend_for(DeviceType::CUDA).device_count() > 0
                                   ? rank1
                                   : "rank 0: device cuda:0: no CUDA GPU is present; " + rank1;
  EXPECT_EQ(errors, std::vector<std::string>(2, expected));
}

TEST(NcclProcessGroup, RanksOfAHostNeedGpusOfTheirOwn) {
  // Ranks as threads share this host: ranks 0 and 2 were both given cuda:1.
  std::vector<Device> devices = {Device::cuda(1), Device::cuda(0), Device::cuda(1)};
  auto errors = run_ranks(3, [&](ProcessGroup& g) {
    auto bootstrap = std::shared_ptr<ProcessGroup>(&g, [](ProcessGroup*) {});
    nccl_process_group(bootstrap, devices[static_cast<size_t>(g.rank())]);
  });
  EXPECT_EQ(errors, std::vector<std::string>(
                        3, nccl_supported() ? "NCCL process group: ranks 0 and 2 run on one host "
                                              "and were both given cuda:1; NCCL needs a GPU of "
                                              "its own for each rank"
                                            : kNoNccl));
}

TEST(ThreadProcessGroup, BroadcastGatherAllGather) {
  std::vector<std::vector<float>> broadcast(3);
  std::vector<std::vector<int64_t>> ranks(3);
  std::vector<std::vector<std::string>> names(3);
  std::vector<std::vector<std::vector<uint8_t>>> gathered(3);
  auto errors = run_ranks(3, [&](ProcessGroup& g) {
    auto r = static_cast<size_t>(g.rank());
    Tensor t = Tensor::from_vector<float>({2}, {static_cast<float>(r), 10.0f + r});
    g.broadcast(t, 1);
    broadcast[r] = values_of(t);
    ranks[r] = all_gather_values<int64_t>(g, 100 + g.rank());
    names[r] = all_gather_strings(g, std::string(r + 1, 'a' + static_cast<char>(r)));
    std::vector<uint8_t> mine(r, static_cast<uint8_t>(r));  // 0, 1 and 2 bytes
    gathered[r] = g.gather(mine, 2);
    g.barrier();
  });
  EXPECT_EQ(errors, (std::vector<std::string>(3)));
  for (size_t r = 0; r < 3; ++r) {
    EXPECT_EQ(broadcast[r], (std::vector<float>{1.0f, 11.0f}));
    EXPECT_EQ(ranks[r], (std::vector<int64_t>{100, 101, 102}));
    EXPECT_EQ(names[r], (std::vector<std::string>{"a", "bb", "ccc"}));
  }
  EXPECT_TRUE(gathered[0].empty());
  EXPECT_TRUE(gathered[1].empty());
  EXPECT_EQ(gathered[2], (std::vector<std::vector<uint8_t>>{{}, {1}, {2, 2}}));
}

TEST(ThreadProcessGroup, AWaitForAbsentRanksTimesOut) {
  auto errors = run_ranks(2,
                          [&](ProcessGroup& g) {
                            if (g.rank() == 0) g.barrier();
                          },
                          {.timeout_seconds = 0.05});
  EXPECT_EQ(errors[0], "all_gather: the other ranks did not join within 0.05 s");
  EXPECT_EQ(errors[1], "");
}

TEST(ThreadProcessGroup, RefusesIntegerSums) {
  auto group = make_thread_process_groups(1)[0];
  try {
    group->all_reduce_sum(Tensor::zeros({2}, DType::Int64), ReduceOrder::Any);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(),
                 "all_reduce_sum: only float32, float64, float16 and bfloat16 tensors can be "
                 "summed, not int64[2] on cpu:0");
  }
}

// ---- rank failures ----

std::vector<std::string> failures(const std::vector<std::string>& local_errors) {
  return run_ranks(static_cast<int>(local_errors.size()), [&](ProcessGroup& g) {
    const std::string& mine = local_errors[static_cast<size_t>(g.rank())];
    std::exception_ptr error = mine.empty() ? nullptr : std::make_exception_ptr(Error(mine));
    try {
      throw_if_any_rank_failed(g, error);
    } catch (const RankFailure& f) {
      EXPECT_FALSE(f.ranks().empty());
      throw;
    }
  });
}

TEST(RankFailure, NoFailureReturnsEverywhere) {
  EXPECT_EQ(failures({"", "", ""}), (std::vector<std::string>(3)));
}

TEST(RankFailure, EveryRankRaisesTheSameMessageNamingTheFailingRanks) {
  EXPECT_EQ(failures({"", "bad input", ""}), (std::vector<std::string>(3, "rank 1: bad input")));
  EXPECT_EQ(failures({"", "boom", "boom"}), (std::vector<std::string>(3, "ranks 1, 2: boom")));
  EXPECT_EQ(failures({"a", "", "b"}), (std::vector<std::string>(3, "rank 0: a; rank 2: b")));
}

// ---- DistributedSampler's rule on one batch ----

TEST(ShardPositions, StridedByRankWithTheExtraRowsOnLowRanks) {
  EXPECT_EQ(shard_positions(10, 0, 3), (std::vector<int64_t>{0, 3, 6, 9}));
  EXPECT_EQ(shard_positions(10, 1, 3), (std::vector<int64_t>{1, 4, 7}));
  EXPECT_EQ(shard_positions(10, 2, 3), (std::vector<int64_t>{2, 5, 8}));
  EXPECT_EQ(shard_positions(5, 0, 1), (std::vector<int64_t>{0, 1, 2, 3, 4}));
  EXPECT_EQ(shard_positions(2, 3, 4), (std::vector<int64_t>{}));
  EXPECT_THROW(shard_positions(4, 2, 2), Error);
}

// ---- Reducer ----

TEST(Reducer, BucketsFollowTheReadyOrderAndStartInOrder) {
  auto group = std::make_shared<RecordingGroup>();
  // 16-byte buckets over gradients of 3, 2 and 4 floats produced in the order 2, 0, 1:
  // bucket 0 = {g2} (16 bytes), bucket 1 = {g0} (12; g1 would make 20), bucket 2 = {g1}.
  Reducer reducer(group, {{{3}}, {{2}}, {{2, 2}}}, {2, 0, 1},
                  {.bucket_bytes = 16, .order = ReduceOrder::RankOrder});
  EXPECT_EQ(reducer.bucket_count(), 3u);
  EXPECT_EQ(reducer.bytes_per_step(), 36);
  reducer.begin_step();
  reducer.mark_ready(0, Tensor::from_vector<float>({3}, {1, 2, 3}));
  EXPECT_TRUE(group->started.empty());  // bucket 1 is complete, but bucket 0 goes first
  reducer.mark_ready(2, Tensor::from_vector<float>({2, 2}, {4, 5, 6, 7}));
  ASSERT_EQ(group->started.size(), 2u);
  EXPECT_EQ(group->started[0], (std::vector<float>{4, 5, 6, 7}));
  EXPECT_EQ(group->started[1], (std::vector<float>{1, 2, 3}));
  reducer.mark_ready(2, Tensor::from_vector<float>({2, 2}, {9, 9, 9, 9}));  // ignored
  reducer.finish_marking();                                                 // g1 = zeros
  ASSERT_EQ(group->started.size(), 3u);
  EXPECT_EQ(group->started[2], (std::vector<float>{0, 0}));
  EXPECT_EQ(group->orders, (std::vector<ReduceOrder>(3, ReduceOrder::RankOrder)));
  reducer.wait();
  EXPECT_EQ(values_of(reducer.gradients()[2]), (std::vector<float>{4, 5, 6, 7}));
  EXPECT_EQ(reducer.gradients()[2].shape(), (Shape{2, 2}));
}

TEST(Reducer, SumsEveryGradientOverTheRanks) {
  std::vector<std::vector<std::vector<float>>> sums(2);
  auto errors = run_ranks(2, [&](ProcessGroup& g) {
    auto group = std::shared_ptr<ProcessGroup>(&g, [](ProcessGroup*) {});
    Reducer reducer(group, {{{2}}, {{3}}, {{1}}}, {0, 1, 2}, {.bucket_bytes = 8});
    for (int step = 0; step < 2; ++step) {
      reducer.begin_step();
      float base = static_cast<float>(10 * g.rank() + step);
      reducer.mark_ready(1, Tensor::from_vector<float>({3}, {base, base + 1, base + 2}));
      reducer.mark_ready(0, Tensor::from_vector<float>({2}, {base, -base}));
      reducer.progress();
      reducer.finish_marking();  // gradient 2 is never marked: it counts as zero
      reducer.wait();
    }
    for (const Tensor& t : reducer.gradients())
      sums[static_cast<size_t>(g.rank())].push_back(values_of(t));
  });
  EXPECT_EQ(errors, (std::vector<std::string>(2)));
  // Step 1: rank 0 gives base 1, rank 1 base 11.
  std::vector<std::vector<float>> expected = {{12, -12}, {12, 14, 16}, {0}};
  EXPECT_EQ(sums[0], expected);
  EXPECT_EQ(sums[1], expected);
}

TEST(Reducer, GradientsOnADeviceAreGatheredThereAndMovedOncePerBucket) {
  auto group = std::make_shared<RecordingGroup>();
  const Device sim = Device::sim(0);
  // One bucket of g0 (2 floats) and g1 (3): g1 is given on the device, g0 never (zero).
  Reducer reducer(group, {{{2}}, {{3}}}, {1, 0}, {.bucket_bytes = 64});
  ASSERT_EQ(reducer.bucket_count(), 1u);
  for (int step = 0; step < 2; ++step) {  // the second step reuses the device copy
    reducer.begin_step();
    const float base = static_cast<float>(step);
    reducer.mark_ready(1, Tensor::from_vector<float>({3}, {base + 1, 2, 3}).to(sim));
    EXPECT_EQ(group->started.size(), static_cast<size_t>(step));  // g0 is still missing
    reducer.finish_marking();
    ASSERT_EQ(group->started.size(), static_cast<size_t>(step + 1));
    // The host bucket the group sums, in ready order: g1, then g0 zeroed on the device.
    EXPECT_EQ(group->started.back(), (std::vector<float>{base + 1, 2, 3, 0, 0}));
    reducer.wait();
    ASSERT_EQ(reducer.gradients().size(), 2u);
    for (const Tensor& g : reducer.gradients()) EXPECT_EQ(g.device(), sim);
    EXPECT_EQ(values_of(reducer.gradients()[1].to(Device::cpu())),
              (std::vector<float>{base + 1, 2, 3}));
    EXPECT_EQ(values_of(reducer.gradients()[0].to(Device::cpu())), (std::vector<float>{0, 0}));
  }
}

TEST(Reducer, ADeviceGroupsBucketsLiveInItsMemory) {
  // A group that sums in sim:0 (as NCCL in its GPU) is given the bucket there, whatever device
  // the gradients come from, and the results are views of it: nothing is staged on the host.
  auto group = std::make_shared<RecordingGroup>();
  group->device = Device::sim(0);
  Reducer reducer(group, {{{2}}, {{3}}, {{1}}}, {0, 1, 2}, {.bucket_bytes = 64});
  ASSERT_EQ(reducer.bucket_count(), 1u);
  for (int step = 0; step < 2; ++step) {
    reducer.begin_step();
    const float base = static_cast<float>(step);
    reducer.mark_ready(0, Tensor::from_vector<float>({2}, {base, 1}));  // from the host
    reducer.mark_ready(1, Tensor::from_vector<float>({3}, {2, base, 3}).to(Device::sim(0)));
    reducer.finish_marking();  // gradient 2: zero
    ASSERT_EQ(group->started.size(), static_cast<size_t>(step + 1));
    EXPECT_EQ(group->devices.back(), Device::sim(0));
    EXPECT_EQ(group->started.back(), (std::vector<float>{base, 1, 2, base, 3, 0}));
    reducer.wait();
    for (const Tensor& g : reducer.gradients()) EXPECT_EQ(g.device(), Device::sim(0));
    EXPECT_EQ(values_of(reducer.gradients()[1].to(Device::cpu())),
              (std::vector<float>{2, base, 3}));
    EXPECT_EQ(values_of(reducer.gradients()[2].to(Device::cpu())), (std::vector<float>{0}));
  }
}

// Compressed buckets (PyTorch's bf16 and fp16 compress hooks): each rank's float32 bucket is
// rounded to 16 bits, the ranks' values are summed in rank order with each partial sum rounded
// to 16 bits, and the sum is widened back into the float32 gradients, in the group's memory
// (the host, or each rank's simulated device as NCCL sums in its GPU).
template <class Half>
void expect_compressed_sums(std::vector<Device> memories) {
  const DType wire = dtype_of<Half>();
  SCOPED_TRACE(std::string(dtype_name(wire)) + (memories.empty() ? " in host memory" : " on sim"));
  const int ranks = 3;
  auto gradient = [](int rank) {
    const float r = static_cast<float>(rank + 1);
    return std::vector<float>{1 + r / 1024, 1000.3f * r, -0.1f * r, 3.14159f / r};
  };
  std::vector<std::vector<float>> got(ranks);
  std::vector<int64_t> bytes(ranks);
  auto errors = run_ranks(
      ranks,
      [&](ProcessGroup& g) {
        auto group = std::shared_ptr<ProcessGroup>(&g, [](ProcessGroup*) {});
        Reducer reducer(group, {{{4}}}, {0}, {.wire_dtype = wire});
        reducer.begin_step();
        reducer.mark_ready(0, Tensor::from_vector<float>({4}, gradient(g.rank())));
        reducer.finish_marking();
        reducer.wait();
        const auto r = static_cast<size_t>(g.rank());
        EXPECT_EQ(reducer.gradients()[0].dtype(), DType::Float32);
        got[r] = values_of(reducer.gradients()[0].to(Device::cpu()));
        bytes[r] = reducer.bytes_per_step();
      },
      {}, memories);
  EXPECT_EQ(errors, std::vector<std::string>(ranks));
  std::vector<float> want;
  for (size_t i = 0; i < 4; ++i) {
    Half sum(gradient(0)[i]);
    for (int r = 1; r < ranks; ++r)
      sum = Half(static_cast<float>(sum) + static_cast<float>(Half(gradient(r)[i])));
    want.push_back(static_cast<float>(sum));
  }
  for (int r = 0; r < ranks; ++r) {
    EXPECT_EQ(got[static_cast<size_t>(r)], want) << "rank " << r;
    EXPECT_EQ(bytes[static_cast<size_t>(r)], 4 * 2) << "rank " << r;
  }
}

TEST(Reducer, CompressedBucketsAreSummedIn16BitsAndWidened) {
  const std::vector<Device> sims = {Device::sim(0), Device::sim(1), Device::sim(2)};
  for (const std::vector<Device>& memories : {std::vector<Device>{}, sims}) {
    expect_compressed_sums<BFloat16>(memories);
    expect_compressed_sums<Float16>(memories);
  }
  auto group = std::make_shared<RecordingGroup>();
  EXPECT_EQ(testing::error_of([&] { Reducer(group, {{{2}}}, {0}, {.wire_dtype = DType::Int8}); }),
            "Reducer: gradients can be sent as float16 or bfloat16, not int8");
  // A float64 bucket is not compressed.
  EXPECT_EQ(Reducer(group, {{{2}, DType::Float64}}, {0}, {.wire_dtype = DType::BFloat16})
                .bytes_per_step(),
            16);
}

TEST(Reducer, RefusesIntegerGradients) {
  auto group = std::make_shared<RecordingGroup>();
  EXPECT_THROW(Reducer(group, {{{2}, DType::Int64}}, {0}), Error);
  EXPECT_THROW(Reducer(group, {{{2}}, {{2}}}, {0, 0}), Error);
}

}  // namespace
}  // namespace dprun
