// DistributedDataParallel with ranks as threads: steps against a one-process Trainer over as
// many devices (bit for bit), uneven and empty shards, failures on one rank, parameter checks,
// and where the gradient buckets start.
#include <gtest/gtest.h>

#include <tuple>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <iomanip>
#include <sstream>

#include "accelerator_test_util.h"
#include "engine/parallel/device_list.h"
#include "engine/training/distributed_data_parallel.h"
#include "loader/npy.h"
#include "loader/onnx_loader.h"
#include "recording_group.h"
#include "thread_ranks.h"

namespace dprun {
namespace {

using testing::RecordingGroup;
using testing::run_ranks;

std::string training_file(const std::string& name) {
  const char* root = std::getenv("DPRUN_SOURCE_DIR");
  return std::string(root ? root : DPRUN_SOURCE_DIR_DEFAULT) + "/models/training/" + name;
}

// The rows `rows` of `t` (along dim 0), in that order.
Tensor rows_of(const Tensor& t, const std::vector<int64_t>& rows) {
  Shape shape = t.shape();
  size_t row_bytes = t.nbytes() / static_cast<size_t>(shape[0]);
  shape[0] = static_cast<int64_t>(rows.size());
  Tensor out = Tensor::empty(shape, t.dtype());
  for (size_t i = 0; i < rows.size(); ++i)
    std::memcpy(static_cast<char*>(out.raw_data()) + i * row_bytes,
                static_cast<const char*>(t.raw_data()) + static_cast<size_t>(rows[i]) * row_bytes,
                row_bytes);
  return out;
}

struct Data {
  Tensor x = read_npy(training_file("mlp_sgd.x.npy"));            // [25, 12]
  Tensor target = read_npy(training_file("mlp_sgd.target.npy"));  // [25]
};

std::vector<int64_t> range(int64_t begin, int64_t end) {
  std::vector<int64_t> out;
  for (int64_t i = begin; i < end; ++i) out.push_back(i);
  return out;
}

// Rank r's rows of the batch `batch`: shard_positions over it.
std::vector<int64_t> shard_rows(const std::vector<int64_t>& batch, int rank, int ranks) {
  std::vector<int64_t> out;
  for (int64_t p : shard_positions(static_cast<int64_t>(batch.size()), rank, ranks))
    out.push_back(batch[static_cast<size_t>(p)]);
  return out;
}

TrainerOptions options_on(std::vector<Device> devices) {
  TrainerOptions options;
  options.training.loss.kind = LossKind::CrossEntropy;
  options.parallel.device_ids = std::move(devices);
  options.parallel.split_policy = SplitPolicy::Even;
  return options;
}

std::shared_ptr<Model> mlp_on(Device device) {
  return std::make_shared<Model>(load_model(training_file("mlp_sgd.onnx"), device));
}

// Rank g's DistributedDataParallel of the MLP on its own CPU device (a prvalue: the object
// is built in place, as its node observer holds its address).
DistributedDataParallel mlp_ddp(ProcessGroup& g) {
  return DistributedDataParallel(mlp_on(Device::cpu(g.rank())), options_on({Device::cpu(g.rank())}),
                                 std::shared_ptr<ProcessGroup>(&g, [](ProcessGroup*) {}));
}

bool same_bytes(const std::vector<Tensor>& a, const std::vector<Tensor>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (a[i].nbytes() != b[i].nbytes() ||
        std::memcmp(a[i].raw_data(), b[i].raw_data(), a[i].nbytes()) != 0)
      return false;
  return true;
}

// Host copies of `tensors`, wherever they live.
std::vector<Tensor> clones(const std::vector<Tensor>& tensors) {
  std::vector<Tensor> out;
  for (const Tensor& t : tensors)
    out.push_back(t.device().type == DeviceType::CPU ? t.clone() : t.to(Device::cpu()));
  return out;
}
// Batches of 10 rows over the 25 rows, the last one partial, then wrapping round.
const std::vector<std::vector<int64_t>> kBatches = {range(0, 10), range(10, 20), range(20, 25),
                                                    range(0, 10)};

// What a rank's group sums in: host memory, or the rank's device (as NCCL its GPU's).
enum class SumIn { Host, Device };

// Ranks on CPU devices, or on simulated accelerators (engine/backends/sim) with a group that
// sums host memory (gradients gathered into each bucket's device copy, which moves to the host
// once per bucket) or the rank's device memory (the buckets live there).
class DistributedRanks : public ::testing::TestWithParam<std::tuple<int, DeviceType, SumIn>> {};

// `n` ranks on devices of `type` train as one process over n such devices, bit for bit. In
// float16 the loss scale starts far too large (2^30): the first steps overflow, and every rank
// must skip exactly the steps the one process skips. (A power of two, so that a loss scaled and
// unscaled is the same number however the ranks' losses are summed.)
void expect_ranks_equal_one_process(int n, DeviceType type, SumIn sum_in, DType precision) {
  Data data;
  auto options_for = [&](std::vector<Device> devices) {
    TrainerOptions options = options_on(std::move(devices));
    options.training.precision = precision;
    options.loss_scaling = {.init_scale = std::ldexp(1.0, 30), .growth_interval = 3};
    return options;
  };
  std::vector<std::vector<int64_t>> batches;
  for (int round = 0; round < (precision == DType::Float16 ? 4 : 1); ++round)
    batches.insert(batches.end(), kBatches.begin(), kBatches.end());
  // The reference: one process, one device per rank, each batch reordered so that device r's
  // chunk (even split) is rank r's shard.
  std::vector<Device> devices;
  for (int r = 0; r < n; ++r) devices.push_back({type, r});
  auto reference_model = mlp_on(devices[0]);
  Trainer reference(reference_model, options_for(devices));
  Sgd reference_sgd(reference.parameters(), {.lr = 0.1, .momentum = 0.9});
  std::vector<double> reference_losses;
  for (const auto& batch : batches) {
    std::vector<int64_t> reordered;
    for (int r = 0; r < n; ++r)
      for (int64_t row : shard_rows(batch, r, n)) reordered.push_back(row);
    reference_losses.push_back(reference.step({rows_of(data.x, reordered)},
                                              rows_of(data.target, reordered), reference_sgd));
  }

  const auto ranks = static_cast<size_t>(n);
  std::vector<std::vector<double>> losses(ranks);
  std::vector<std::vector<Tensor>> parameters(ranks);
  std::vector<std::pair<int64_t, float>> skipped_and_scale(ranks);
  auto body = [&](ProcessGroup& g) {
    auto group = std::shared_ptr<ProcessGroup>(&g, [](ProcessGroup*) {});
    const Device rank_device{type, g.rank()};
    auto model = mlp_on(rank_device);
    DistributedDataParallel ddp(model, options_for({rank_device}), group, {.deterministic = true});
    EXPECT_TRUE(ddp.overlaps_backward());
    Sgd sgd(ddp.trainer().parameters(), {.lr = 0.1, .momentum = 0.9});
    for (const auto& batch : batches) {
      auto mine = shard_rows(batch, g.rank(), n);
      losses[static_cast<size_t>(g.rank())].push_back(
          ddp.step({rows_of(data.x, mine)}, rows_of(data.target, mine),
                   static_cast<int64_t>(mine.size()), static_cast<int64_t>(batch.size()), sgd));
    }
    ddp.check_parameters_in_sync();
    parameters[static_cast<size_t>(g.rank())] = clones(model->parameters());
    if (const GradScaler* scaler = ddp.trainer().grad_scaler())
      skipped_and_scale[static_cast<size_t>(g.rank())] = {scaler->skipped_steps(), scaler->scale()};
    EXPECT_EQ(ddp.stats().steps, static_cast<int64_t>(batches.size()));
    const Device gradients_in = type == DeviceType::CPU ? Device::cpu() : rank_device;
    for (const Tensor& gradient : ddp.gradients())
      EXPECT_EQ(gradient.device(), gradients_in) << "rank " << g.rank();
  };
  auto errors = run_ranks(n, body, {}, sum_in == SumIn::Device ? devices : std::vector<Device>{});
  EXPECT_EQ(errors, std::vector<std::string>(ranks));
  for (size_t r = 0; r < ranks; ++r) {
    EXPECT_EQ(losses[r], reference_losses) << "rank " << r;
    EXPECT_TRUE(same_bytes(parameters[r], clones(reference_model->parameters()))) << "rank " << r;
    if (const GradScaler* scaler = reference.grad_scaler()) {
      EXPECT_EQ(skipped_and_scale[r], std::make_pair(scaler->skipped_steps(), scaler->scale()))
          << "rank " << r;
    }
  }
  if (const GradScaler* scaler = reference.grad_scaler()) {
    // Scales above 2^18 overflow this model's float16 gradients: 12 halvings at least.
    EXPECT_GE(scaler->skipped_steps(), 12);
    EXPECT_LT(scaler->skipped_steps(), static_cast<int64_t>(batches.size()));
  }
}

TEST_P(DistributedRanks, EqualsOneProcessOverAsManyDevicesBitForBit) {
  const auto [n, type, sum_in] = GetParam();
  expect_ranks_equal_one_process(n, type, sum_in, DType::Float32);
}

TEST(DistributedDataParallel, Float16RanksSkipTheStepsOneProcessSkips) {
  expect_ranks_equal_one_process(2, DeviceType::CPU, SumIn::Host, DType::Float16);
  expect_ranks_equal_one_process(2, DeviceType::Sim, SumIn::Device, DType::Float16);
}

INSTANTIATE_TEST_SUITE_P(Ranks, DistributedRanks,
                         ::testing::Values(std::tuple{2, DeviceType::CPU, SumIn::Host},
                                           std::tuple{3, DeviceType::CPU, SumIn::Host},
                                           std::tuple{2, DeviceType::Sim, SumIn::Host},
                                           std::tuple{3, DeviceType::Sim, SumIn::Host},
                                           std::tuple{2, DeviceType::Sim, SumIn::Device},
                                           std::tuple{3, DeviceType::Sim, SumIn::Device}),
                         [](const auto& info) {
                           return std::to_string(std::get<0>(info.param)) + "_ranks_of_" +
                                  std::string(device_type_name(std::get<1>(info.param))) +
                                  (std::get<2>(info.param) == SumIn::Device
                                       ? "_summing_on_the_device"
                                       : "");
                         });

TEST(DistributedDataParallel, UnevenShardsAndARankWithoutRows) {
  // A global batch of 3 rows over 4 ranks: shards of 1, 1, 1 and 0 rows.
  Data data;
  const std::vector<int64_t> batch = {4, 9, 17};
  auto reference_model = mlp_on(Device::cpu(0));
  Trainer reference(reference_model, options_on(parse_device_list("cpu:0,cpu:1,cpu:2,cpu:3")));
  double reference_loss =
      reference.forward_backward({rows_of(data.x, batch)}, rows_of(data.target, batch));
  std::vector<Tensor> reference_gradients = clones(reference.gradients());

  std::vector<double> losses(4);
  std::vector<std::vector<Tensor>> gradients(4);
  std::vector<std::vector<int64_t>> rows(4);
  auto errors = run_ranks(4, [&](ProcessGroup& g) {
    DistributedDataParallel ddp = mlp_ddp(g);
    auto mine = shard_rows(batch, g.rank(), 4);
    auto r = static_cast<size_t>(g.rank());
    losses[r] = ddp.forward_backward({rows_of(data.x, mine)}, rows_of(data.target, mine),
                                     static_cast<int64_t>(mine.size()), 3);
    gradients[r] = clones(ddp.gradients());
    rows[r] = ddp.stats().rows;
  });
  EXPECT_EQ(errors, std::vector<std::string>(4));
  for (size_t r = 0; r < 4; ++r) {
    EXPECT_EQ(losses[r], reference_loss);
    EXPECT_EQ(rows[r], (std::vector<int64_t>{1, 1, 1, 0}));
    ASSERT_EQ(gradients[r].size(), reference_gradients.size());
    for (size_t i = 0; i < gradients[r].size(); ++i)
      for (int64_t k = 0; k < gradients[r][i].numel(); ++k)
        ASSERT_EQ(gradients[r][i].data<float>()[k], reference_gradients[i].data<float>()[k])
            << "rank " << r << " gradient " << i << "[" << k << "]";
  }
}

TEST(DistributedDataParallel, AFailingRankStopsEveryRankAndTheNextStepWorks) {
  Data data;
  Tensor wide = Tensor::zeros({5, 13}, DType::Float32);  // the model takes 12 features
  std::vector<std::string> first(2), second(2);
  auto errors = run_ranks(2, [&](ProcessGroup& g) {
    DistributedDataParallel ddp = mlp_ddp(g);
    Sgd sgd(ddp.trainer().parameters(), {.lr = 0.1});
    auto mine = shard_rows(range(0, 10), g.rank(), 2);
    Tensor x = g.rank() == 1 ? wide : rows_of(data.x, mine);
    try {
      ddp.step({x}, rows_of(data.target, mine), 5, 10, sgd);
    } catch (const RankFailure& f) {
      first[static_cast<size_t>(g.rank())] = f.what();
      EXPECT_EQ(f.ranks(), (std::vector<int>{1}));
    }
    ddp.step({rows_of(data.x, mine)}, rows_of(data.target, mine), 5, 10, sgd);
    ddp.check_parameters_in_sync();
  });
  EXPECT_EQ(errors, std::vector<std::string>(2));
  const std::string expected =
      "rank 1: step 1: 1 of 1 replica failed: replica 0 on cpu:1: input 'x' expects shape "
      "[batch, 12] but got [5, 13]";
  EXPECT_EQ(first, std::vector<std::string>(2, expected));
}

// Gradient accumulation with no_sync: each rank sums its batches' gradients itself and the
// ranks sum the totals once, with the last batch. A step of three batches (10, 10 and 2 rows;
// rank 2's shard of the last is empty) equals one process accumulating the same batches.
TEST(DistributedDataParallel, NoSyncBatchesAreSummedOverTheRanksOnceWithTheLast) {
  Data data;
  const std::vector<std::vector<int64_t>> batches = {range(0, 10), range(10, 20), {20, 21}};
  const int64_t step_rows = 22;
  Trainer reference(mlp_on(Device::cpu(0)), options_on({Device::cpu(0)}));
  double reference_loss = 0;
  for (size_t j = 0; j < batches.size(); ++j)
    reference_loss +=
        reference.forward_backward({rows_of(data.x, batches[j])}, rows_of(data.target, batches[j]),
                                   static_cast<double>(batches[j].size()) / step_rows, j > 0);
  const std::vector<Tensor> reference_gradients = clones(reference.gradients());

  std::vector<double> losses(3);
  std::vector<std::vector<Tensor>> gradients(3);
  std::vector<DistributedStats> stats(3);
  auto errors = run_ranks(3, [&](ProcessGroup& g) {
    DistributedDataParallel ddp = mlp_ddp(g);
    const auto r = static_cast<size_t>(g.rank());
    for (size_t j = 0; j < batches.size(); ++j) {
      auto mine = shard_rows(batches[j], g.rank(), 3);
      losses[r] = ddp.forward_backward({rows_of(data.x, mine)}, rows_of(data.target, mine),
                                       static_cast<int64_t>(mine.size()), step_rows,
                                       j + 1 == batches.size());
    }
    gradients[r] = clones(ddp.gradients());
    stats[r] = ddp.stats();
  });
  EXPECT_EQ(errors, std::vector<std::string>(3));
  for (size_t r = 0; r < 3; ++r) {
    SCOPED_TRACE("rank " + std::to_string(r));
    EXPECT_NEAR(losses[r], reference_loss, 1e-6 * reference_loss);
    EXPECT_EQ(stats[r].steps, 1);
    EXPECT_EQ(stats[r].rows, (std::vector<int64_t>{9, 7, 6}));
    // One all-reduce of every gradient: 12x16 + 16 + 16x5 + 5 floats.
    EXPECT_EQ(stats[r].allreduce_bytes, 293 * 4);
    ASSERT_EQ(gradients[r].size(), reference_gradients.size());
    for (size_t i = 0; i < gradients[r].size(); ++i)
      for (int64_t k = 0; k < gradients[r][i].numel(); ++k) {
        const float want = reference_gradients[i].data<float>()[k];
        ASSERT_NEAR(gradients[r][i].data<float>()[k], want, 1e-7 + 1e-5 * std::fabs(want))
            << "gradient " << i << "[" << k << "]";
      }
  }
}

// The MLP's targets with rows `ignored` set to -100, the ignore index of the cross entropy.
Tensor with_ignored(const Tensor& target, const std::vector<int64_t>& ignored) {
  Tensor out = target.clone();
  for (int64_t row : ignored) out.data<int64_t>()[row] = -100;
  return out;
}

// With ignored targets each rank weighs its share of the step's counted targets, not of its
// rows: a batch of 10 whose rows 0, 2, 4 and 6 are ignored gives rank 0 (rows 0, 2, ..., 8)
// 1 counted target and rank 1 5, weights 1/6 and 5/6 where rows would give 1/2 each. step()
// counts over the ranks itself, and equals one process over two devices whose chunks are the
// shards bit for bit; a step whose targets are all ignored has the loss 0 and no gradient.
TEST(DistributedDataParallel, RanksWithIgnoredTargetsWeighTheirCountedTargets) {
  Data data;
  const Tensor target = with_ignored(data.target, {0, 2, 4, 6});
  const std::vector<int64_t> batch = range(0, 10);
  std::vector<int64_t> reordered;
  for (int r = 0; r < 2; ++r)
    for (int64_t row : shard_rows(batch, r, 2)) reordered.push_back(row);
  auto reference_model = mlp_on(Device::cpu(0));
  Trainer reference(reference_model, options_on(parse_device_list("cpu:0,cpu:1")));
  Sgd reference_sgd(reference.parameters(), {.lr = 0.1});
  const double reference_loss =
      reference.step({rows_of(data.x, reordered)}, rows_of(target, reordered), reference_sgd);
  // The mean over the counted targets: the one-device loss of the whole batch.
  Trainer one(mlp_on(Device::cpu(0)), options_on({Device::cpu(0)}));
  const double mean = one.forward_backward({rows_of(data.x, batch)}, rows_of(target, batch));
  EXPECT_NEAR(reference_loss, mean, 1e-6 * mean);
  EXPECT_EQ(one.counted_targets(rows_of(target, batch)), 6);

  std::vector<double> losses(2), ignored_losses(2);
  std::vector<std::vector<Tensor>> parameters(2), ignored_gradients(2);
  auto errors = run_ranks(2, [&](ProcessGroup& g) {
    auto group = std::shared_ptr<ProcessGroup>(&g, [](ProcessGroup*) {});
    auto model = mlp_on(Device::cpu(g.rank()));
    DistributedDataParallel ddp(model, options_on({Device::cpu(g.rank())}), group);
    Sgd sgd(ddp.trainer().parameters(), {.lr = 0.1});
    const auto mine = shard_rows(batch, g.rank(), 2);
    const auto r = static_cast<size_t>(g.rank());
    losses[r] = ddp.step({rows_of(data.x, mine)}, rows_of(target, mine), 5, 10, sgd);
    parameters[r] = clones(model->parameters());
    EXPECT_EQ(ddp.count_targets({rows_of(target, mine)}), 6);
    const Tensor all_ignored = with_ignored(data.target, range(0, 25));
    ignored_losses[r] =
        ddp.forward_backward({rows_of(data.x, mine)}, rows_of(all_ignored, mine), 5, 10);
    ignored_gradients[r] = clones(ddp.gradients());
  });
  EXPECT_EQ(errors, std::vector<std::string>(2));
  for (size_t r = 0; r < 2; ++r) {
    SCOPED_TRACE("rank " + std::to_string(r));
    EXPECT_EQ(losses[r], reference_loss);
    EXPECT_TRUE(same_bytes(parameters[r], clones(reference_model->parameters())));
    EXPECT_EQ(ignored_losses[r], 0.0);
    for (const Tensor& gradient : ignored_gradients[r])
      for (int64_t k = 0; k < gradient.numel(); ++k)
        ASSERT_EQ(gradient.data<float>()[k], 0.0f) << k;
  }
}

// No-sync batches with ignored targets, given the step's counted targets over the ranks
// (count_targets of every batch, before the first): the step is the mean over all of them, as
// one batch of all the rows in one process, within float rounding.
TEST(DistributedDataParallel, NoSyncBatchesWithIgnoredTargetsWeighTheStepsCountedTargets) {
  Data data;
  const Tensor target = with_ignored(data.target, {0, 2, 4, 6, 8, 11, 19});
  const std::vector<std::vector<int64_t>> batches = {range(0, 10), range(10, 20)};
  Trainer reference(mlp_on(Device::cpu(0)), options_on({Device::cpu(0)}));
  const double reference_loss =
      reference.forward_backward({rows_of(data.x, range(0, 20))}, rows_of(target, range(0, 20)));
  const std::vector<Tensor> reference_gradients = clones(reference.gradients());

  std::vector<double> losses(2);
  std::vector<std::vector<Tensor>> gradients(2);
  auto errors = run_ranks(2, [&](ProcessGroup& g) {
    DistributedDataParallel ddp = mlp_ddp(g);
    std::vector<Tensor> targets;
    for (const auto& batch : batches)
      targets.push_back(rows_of(target, shard_rows(batch, g.rank(), 2)));
    const std::optional<int64_t> counted = ddp.count_targets(targets);
    EXPECT_EQ(counted, 13);
    const auto r = static_cast<size_t>(g.rank());
    for (size_t j = 0; j < batches.size(); ++j) {
      auto mine = shard_rows(batches[j], g.rank(), 2);
      losses[r] = ddp.forward_backward({rows_of(data.x, mine)}, targets[j], 5, 20,
                                       j + 1 == batches.size(), counted);
    }
    gradients[r] = clones(ddp.gradients());
  });
  EXPECT_EQ(errors, std::vector<std::string>(2));
  for (size_t r = 0; r < 2; ++r) {
    SCOPED_TRACE("rank " + std::to_string(r));
    EXPECT_NEAR(losses[r], reference_loss, 1e-6 * reference_loss);
    ASSERT_EQ(gradients[r].size(), reference_gradients.size());
    for (size_t i = 0; i < gradients[r].size(); ++i)
      for (int64_t k = 0; k < gradients[r][i].numel(); ++k) {
        const float want = reference_gradients[i].data<float>()[k];
        ASSERT_NEAR(gradients[r][i].data<float>()[k], want, 1e-7 + 1e-5 * std::fabs(want))
            << "gradient " << i << "[" << k << "]";
      }
  }
}

// A rank that fails in a no-sync batch goes on to the syncing call, where every rank learns of
// it; the next step works.
TEST(DistributedDataParallel, AFailureInANoSyncBatchIsReportedByTheSyncingCall) {
  Data data;
  Tensor wide = Tensor::zeros({5, 13}, DType::Float32);  // the model takes 12 features
  std::vector<std::string> failures(2);
  auto errors = run_ranks(2, [&](ProcessGroup& g) {
    DistributedDataParallel ddp = mlp_ddp(g);
    Sgd sgd(ddp.trainer().parameters(), {.lr = 0.1});
    auto mine = shard_rows(range(0, 10), g.rank(), 2);
    Tensor x = rows_of(data.x, mine), target = rows_of(data.target, mine);
    const double loss = ddp.forward_backward({g.rank() == 1 ? wide : x}, target, 5, 20, false);
    if (g.rank() == 1) {
      EXPECT_EQ(loss, 0.0);  // the failure waits for the syncing call
    }
    try {
      ddp.forward_backward({x}, target, 5, 20, true);
    } catch (const RankFailure& f) {
      failures[static_cast<size_t>(g.rank())] = f.what();
    }
    ddp.step({x}, target, 5, 10, sgd);
    ddp.check_parameters_in_sync();
  });
  EXPECT_EQ(errors, std::vector<std::string>(2));
  EXPECT_EQ(failures, std::vector<std::string>(
                          2,
                          "rank 1: step 1: 1 of 1 replica failed: replica 0 on cpu:1: input 'x' "
                          "expects shape [batch, 12] but got [5, 13]"));
}

// With one rank and a recording group: three accumulated batches make one step's all-reduces.
TEST(DistributedDataParallel, AccumulatedBatchesAllReduceOncePerStep) {
  Data data;
  auto group = std::make_shared<RecordingGroup>();
  DistributedDataParallel ddp(mlp_on(Device::cpu(0)), options_on({Device::cpu(0)}), group,
                              {.bucket_bytes = 64});
  auto all_reduces = [&] {
    return std::count_if(group->events.begin(), group->events.end(),
                         [](const std::string& e) { return e.rfind("all_reduce_sum", 0) == 0; });
  };
  for (int j = 0; j < 3; ++j)
    ddp.forward_backward({rows_of(data.x, range(0, 10))}, rows_of(data.target, range(0, 10)), 10,
                         30, j == 2);
  EXPECT_EQ(all_reduces(), 4);  // one per bucket
  for (int j = 0; j < 3; ++j)
    ddp.forward_backward({rows_of(data.x, range(0, 10))}, rows_of(data.target, range(0, 10)), 10,
                         30);
  EXPECT_EQ(all_reduces(), 4 + 3 * 4);
}

std::string hex(uint64_t v) {
  std::ostringstream out;
  out << "0x" << std::hex << std::setw(16) << std::setfill('0') << v;
  return out.str();
}

TEST(DistributedDataParallel, RanksWhoseParametersDifferAreNamed) {
  std::vector<uint64_t> checksums(3);
  auto errors = run_ranks(3, [&](ProcessGroup& g) {
    auto group = std::shared_ptr<ProcessGroup>(&g, [](ProcessGroup*) {});
    auto model = mlp_on(Device::cpu(g.rank()));
    DistributedDataParallel ddp(model, options_on({Device::cpu(g.rank())}), group);
    ddp.broadcast_parameters();
    EXPECT_EQ(ddp.check_parameters_in_sync(), checksum_tensors(model->parameters()));
    if (g.rank() == 2) model->parameter("fc1.bias").data<float>()[3] += 1.0f;
    checksums[static_cast<size_t>(g.rank())] = checksum_tensors(model->parameters());
    ddp.check_parameters_in_sync();
  });
  std::string expected = "the ranks' parameters differ: rank 2's checksum " + hex(checksums[2]) +
                         " is not rank 0's " + hex(checksums[0]);
  EXPECT_NE(checksums[2], checksums[0]);
  EXPECT_EQ(errors, std::vector<std::string>(3, expected));
}

// Where each rank trains and what its group works in: CPU devices and host memory, sim
// devices and host memory (tensors staged through host copies), or sim devices and each rank's
// device memory (as NCCL on GPUs: tensors broadcast and summed where they are).
enum class Ranks { OnCpus, OnSimsOverHost, OnSimsOverDevices };

std::string ranks_name(const ::testing::TestParamInfo<Ranks>& info) {
  switch (info.param) {
    case Ranks::OnCpus:
      return "on_cpus";
    case Ranks::OnSimsOverHost:
      return "on_sims_over_host_memory";
    default:
      return "on_sims_over_device_memory";
  }
}

Device rank_device(Ranks ranks, int rank) {
  return ranks == Ranks::OnCpus ? Device::cpu(rank) : Device::sim(rank);
}

std::vector<std::string> run_placed_ranks(Ranks ranks, int n,
                                          const std::function<void(ProcessGroup&)>& body) {
  std::vector<Device> reduce_devices;
  if (ranks == Ranks::OnSimsOverDevices)
    for (int r = 0; r < n; ++r) reduce_devices.push_back(Device::sim(r));
  return run_ranks(n, body, {}, reduce_devices);
}

// Element 0 of a parameter, wherever it is.
float first_value(const Tensor& t) {
  return t.device().type == DeviceType::CPU ? t.data<float>()[0]
                                            : t.to(Device::cpu()).data<float>()[0];
}

class PlacedRanks : public ::testing::TestWithParam<Ranks> {};

TEST_P(PlacedRanks, BroadcastGivesEveryRankRankZerosParameters) {
  std::vector<uint64_t> checksums(2);
  auto errors = run_placed_ranks(GetParam(), 2, [&](ProcessGroup& g) {
    auto group = std::shared_ptr<ProcessGroup>(&g, [](ProcessGroup*) {});
    const Device device = rank_device(GetParam(), g.rank());
    auto model = mlp_on(device);
    if (g.rank() == 1) {
      Tensor w = model->parameter("fc2.weight");  // shares the parameter's storage
      Tensor changed = w.to(Device::cpu(), true);
      changed.data<float>()[0] = 42.0f;
      w.copy_from(changed);
    }
    DistributedDataParallel ddp(model, options_on({device}), group);
    ddp.broadcast_parameters();
    checksums[static_cast<size_t>(g.rank())] = checksum_tensors(model->parameters());
  });
  EXPECT_EQ(errors, std::vector<std::string>(2));
  EXPECT_EQ(checksums[0], checksums[1]);
  EXPECT_EQ(checksums[0], checksum_tensors(mlp_on(Device::cpu(0))->parameters()));
}

INSTANTIATE_TEST_SUITE_P(Ranks, PlacedRanks,
                         ::testing::Values(Ranks::OnCpus, Ranks::OnSimsOverHost,
                                           Ranks::OnSimsOverDevices),
                         ranks_name);

// y = BatchNormalization(x) in training mode, trained with an MSE loss: the running mean is
// in-place state that each rank updates from its own shard.
std::shared_ptr<Model> batchnorm_on(Device device) {
  auto g = std::make_shared<Graph>();
  g->name = "bn_training";
  g->opset_imports[""] = 15;
  SymbolicShape shape{Dim::named("batch"), Dim::known(1)};
  g->inputs.push_back({"x", {DType::Float32, shape}});
  g->initializers["scale"] = Tensor::from_vector<float>({1}, {1});
  g->initializers["bias"] = Tensor::from_vector<float>({1}, {0});
  g->initializers["mean"] = Tensor::from_vector<float>({1}, {10});
  g->initializers["var"] = Tensor::from_vector<float>({1}, {1});
  Node bn;
  bn.name = "bn";
  bn.op_type = "BatchNormalization";
  bn.inputs = {"x", "scale", "bias", "mean", "var"};
  bn.outputs = {"y", "running_mean", "running_var"};
  Attribute training;
  training.kind = Attribute::Kind::Int;
  training.i = 1;
  bn.attributes["training_mode"] = training;
  g->nodes.push_back(bn);
  g->outputs.push_back({"y", {DType::Float32, shape}});
  g->state_updates = {{"running_mean", "mean"}, {"running_var", "var"}};
  return std::make_shared<Model>(g, device);
}

class BroadcastBuffers : public ::testing::TestWithParam<std::tuple<bool, Ranks>> {};

TEST_P(BroadcastBuffers, RankZerosRunningStatisticsAreKept) {
  const auto [broadcast, ranks] = GetParam();
  // Global batch {0, 2, 100, 300}: rank 0 takes {0, 100} (mean 50), rank 1 {2, 300} (151).
  Tensor x = Tensor::from_vector<float>({4, 1}, {0, 2, 100, 300});
  std::vector<float> means(2);
  auto errors = run_placed_ranks(ranks, 2, [&](ProcessGroup& g) {
    auto group = std::shared_ptr<ProcessGroup>(&g, [](ProcessGroup*) {});
    const Device device = rank_device(ranks, g.rank());
    auto model = batchnorm_on(device);
    TrainerOptions options = options_on({device});
    options.training.loss.kind = LossKind::Mse;
    DistributedDataParallel ddp(model, options, group, {.broadcast_buffers = broadcast});
    EXPECT_EQ(ddp.trainer().parameter_names(), (std::vector<std::string>{"bias", "scale"}));
    Sgd sgd(ddp.trainer().parameters(), {.lr = 0.1});
    auto mine = shard_positions(4, g.rank(), 2);
    ddp.step({rows_of(x, mine)}, Tensor::zeros({2, 1}, DType::Float32), 2, 4, sgd);
    try {
      ddp.check_parameters_in_sync();
    } catch (...) {
      means[static_cast<size_t>(g.rank())] = first_value(model->parameter("mean"));
      throw;
    }
    means[static_cast<size_t>(g.rank())] = first_value(model->parameter("mean"));
  });
  // momentum 0.9: rank 0 holds 10 * 0.9 + 50 * 0.1 = 14, rank 1 10 * 0.9 + 151 * 0.1 = 24.1.
  EXPECT_FLOAT_EQ(means[0], 14.0f);
  if (broadcast) {
    EXPECT_EQ(errors, std::vector<std::string>(2));
    EXPECT_FLOAT_EQ(means[1], 14.0f);
  } else {
    EXPECT_FLOAT_EQ(means[1], 24.1f);
    for (const auto& e : errors)
      EXPECT_EQ(e.rfind("the ranks' parameters differ: rank 1's checksum 0x", 0), 0u) << e;
  }
}

INSTANTIATE_TEST_SUITE_P(OnOrOff, BroadcastBuffers,
                         ::testing::Combine(::testing::Bool(),
                                            ::testing::Values(Ranks::OnCpus, Ranks::OnSimsOverHost,
                                                              Ranks::OnSimsOverDevices)),
                         [](const auto& info) {
                           return std::string(std::get<0>(info.param) ? "on" : "off") + "_" +
                                  ranks_name({std::get<1>(info.param), info.index});
                         });

TEST(DistributedDataParallel, OneDeviceStartsEveryBucketDuringTheBackwardPass) {
  Data data;
  auto group = std::make_shared<RecordingGroup>();
  // An observer of ours logs every node next to the all-reduces (it runs before the DDP's).
  TrainerOptions options = options_on({Device::cpu(0)});
  NodeObserver log;
  log.after = [&](const Node& node, Device, std::span<const Tensor>) {
    group->events.push_back("node " + node.op_type);
  };
  options.parallel.observers.push_back(log);
  // 64-byte buckets: fc2.weight (320 bytes), fc2.bias (20), fc1.weight (768) and fc1.bias (64)
  // each fill a bucket of their own, in the order the backward pass computes them.
  DistributedDataParallel ddp(mlp_on(Device::cpu(0)), options, group, {.bucket_bytes = 64});
  EXPECT_TRUE(ddp.overlaps_backward());
  EXPECT_EQ(ddp.stats().buckets, 4u);
  ddp.forward_backward({rows_of(data.x, range(0, 10))}, rows_of(data.target, range(0, 10)), 10, 10);
  // Started by the DDP's observer on the thread that ran the backward pass (with one device,
  // the caller's) while the executor ran it: the first right after the node that computes
  // fc2.weight's gradient, with the nodes for fc1's gradients still to run.
  ASSERT_EQ(group->threads.size(), 4u);
  for (auto id : group->threads) EXPECT_EQ(id, std::this_thread::get_id());
  std::vector<std::string> buckets;
  size_t first = group->events.size(), nodes_after_first = 0;
  for (size_t e = 0; e < group->events.size(); ++e) {
    if (group->events[e].rfind("all_reduce_sum", 0) == 0) {
      buckets.push_back(group->events[e]);
      first = std::min(first, e);
    } else if (e > first) {
      ++nodes_after_first;
    }
  }
  EXPECT_EQ(buckets, (std::vector<std::string>{"all_reduce_sum of 80", "all_reduce_sum of 5",
                                               "all_reduce_sum of 192", "all_reduce_sum of 16"}));
  EXPECT_GE(nodes_after_first, 15u);
}

TEST(DistributedDataParallel, SeveralDevicesStartTheBucketsAfterTheReplicasAreSummed) {
  Data data;
  auto group = std::make_shared<RecordingGroup>();
  DistributedDataParallel ddp(mlp_on(Device::cpu(0)), options_on(parse_device_list("cpu:0,cpu:1")),
                              group, {.bucket_bytes = 64});
  EXPECT_FALSE(ddp.overlaps_backward());
  ddp.forward_backward({rows_of(data.x, range(0, 10))}, rows_of(data.target, range(0, 10)), 10, 10);
  ASSERT_EQ(group->threads.size(), 4u);
  for (auto id : group->threads) EXPECT_EQ(id, std::this_thread::get_id());
}

}  // namespace
}  // namespace dprun
