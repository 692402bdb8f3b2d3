// DataParallel semantics on CPU virtual devices (4 and 8 devices on any machine).
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include "engine/backend.h"
#include "engine/parallel/data_parallel.h"
#include "engine/parallel/device_list.h"
#include "engine/parallel/gather.h"
#include "engine/parallel/replicate.h"
#include "engine/warning.h"
#include "op_test_util.h"
#include "parallel_test_kernels.h"

namespace dprun {
namespace {

using testing::add_row_graph;
using testing::expect_values;
using testing::fail_on_graph;
using testing::running_mean_graph;
using testing::scale_rows_graph;
using testing::sum_last_dim_graph;

std::vector<Device> cpus(int n) {
  std::vector<Device> d;
  for (int i = 0; i < n; ++i) d.push_back(Device::cpu(i));
  return d;
}

Tensor rows(int64_t n, int64_t width, float offset = 0) {
  Tensor t = Tensor::empty({n, width}, DType::Float32);
  for (int64_t i = 0; i < t.numel(); ++i)
    t.data<float>()[i] = offset + static_cast<float>(i) * 0.5f;
  return t;
}

bool bitwise_equal(const Tensor& a, const Tensor& b) {
  return a.shape() == b.shape() && a.dtype() == b.dtype() &&
         std::memcmp(a.raw_data(), b.raw_data(), a.nbytes()) == 0;
}

std::shared_ptr<Model> model_on(std::shared_ptr<Graph> g, Device d = Device::cpu(0)) {
  return std::make_shared<Model>(g, d);
}

DataParallelOptions on(int devices) {
  DataParallelOptions o;
  o.device_ids = cpus(devices);
  return o;
}

class ManyDevices : public ::testing::TestWithParam<int> {};

TEST_P(ManyDevices, MatchesSingleDeviceBitForBit) {
  auto model = model_on(scale_rows_graph(3));
  Tensor x = rows(13, 3);
  auto single = model->run({x});
  DataParallel dp(model, on(GetParam()));
  auto parallel = dp.forward({x});
  EXPECT_TRUE(bitwise_equal(single[0], parallel[0]));
  EXPECT_EQ(parallel[0].device(), Device::cpu(0));
  int64_t total = 0;
  for (int64_t r : dp.last_run().chunk_rows) total += r;
  EXPECT_EQ(total, 13);
}
INSTANTIATE_TEST_SUITE_P(VirtualDevices, ManyDevices, ::testing::Values(2, 3, 4, 8));

TEST(DataParallel, FiveRowsOnFourDevicesUseThreeReplicas) {
  DataParallel dp(model_on(scale_rows_graph(2)), on(4));
  dp.forward({rows(5, 2)});
  auto run = dp.last_run();
  EXPECT_EQ(run.devices_used,
            (std::vector<Device>{Device::cpu(0), Device::cpu(1), Device::cpu(2)}));
  EXPECT_EQ(run.chunk_rows, (std::vector<int64_t>{2, 2, 1}));
  EXPECT_EQ(run.timings.size(), 3u);
}

TEST(DataParallel, EvenPolicyKeepsEveryDeviceBusy) {
  auto options = on(4);
  options.split_policy = SplitPolicy::Even;
  DataParallel dp(model_on(scale_rows_graph(2)), options);
  dp.forward({rows(5, 2)});
  EXPECT_EQ(dp.last_run().chunk_rows, (std::vector<int64_t>{2, 1, 1, 1}));
}

TEST(DataParallel, WeightedPolicyGivenAndMeasured) {
  auto options = on(2);
  options.split_policy = SplitPolicy::Weighted;
  options.weights = {3, 1};
  DataParallel given(model_on(scale_rows_graph(2)), options);
  given.forward({rows(8, 2)});
  EXPECT_EQ(given.last_run().chunk_rows, (std::vector<int64_t>{6, 2}));
  options.weights.clear();
  auto model = model_on(scale_rows_graph(2));
  DataParallel measured(model, options);
  auto out = measured.forward({rows(64, 2)});
  auto run = measured.last_run();
  EXPECT_EQ(run.chunk_rows[0] + run.chunk_rows[1], 64);
  EXPECT_EQ(measured.options().weights.size(), 2u);
  EXPECT_TRUE(bitwise_equal(out[0], model->run({rows(64, 2)})[0]));
}

TEST(DataParallel, ParametersMustBeOnTheFirstDevice) {
  auto model = model_on(scale_rows_graph(2), Device::cpu(1));
  try {
    DataParallel dp(model, on(2));
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(),
                 "module must have its parameters on device cpu:0 (device_ids[0]) but found one of "
                 "them on device: cpu:1");
  }
}

TEST(DataParallel, AFixedSizeSplitDimTakesChunksOfThatSizeOnly) {
  // A model exported with a static batch of 2 runs on two devices a batch of 4, as the same
  // model on one device runs each half.
  auto g = scale_rows_graph(2);
  (*g->inputs[0].type.shape)[0] = Dim::known(2);
  auto model = model_on(g);
  const Tensor x = rows(4, 2);
  DataParallel dp(model, on(2));
  const Tensor both = dp.forward({x})[0];
  EXPECT_EQ(dp.last_run().chunk_rows, (std::vector<int64_t>{2, 2}));
  const Tensor first = model->run({x.narrow(0, 0, 2).clone()})[0];
  const Tensor second = model->run({x.narrow(0, 2, 2).clone()})[0];
  EXPECT_TRUE(bitwise_equal(both.narrow(0, 0, 2).clone(), first));
  EXPECT_TRUE(bitwise_equal(both.narrow(0, 2, 2).clone(), second));
  // Chunks of another size are refused before any replica runs.
  for (int64_t n : {3, 5}) {
    try {
      dp.forward({rows(n, 2)});
      FAIL() << "no error for " << n << " rows";
    } catch (const Error& e) {
      EXPECT_STREQ(e.what(), (std::string("input 'x' has the fixed size 2 along dim 0, but the "
                                          "split gives its devices ") +
                              (n == 3 ? "2, 1" : "3, 2") +
                              ": give each device 2 (a batch of 4 on 2 devices), broadcast it "
                              "(--split x=none) or export the model with a symbolic dim there")
                                 .c_str());
    }
  }
}

TEST(DataParallel, DuplicateDevicesAreAnError) {
  auto options = on(2);
  options.device_ids.push_back(Device::cpu(1));
  EXPECT_THROW(DataParallel(model_on(scale_rows_graph(2)), options), Error);
}

TEST(DataParallel, OneDeviceRunsTheModelDirectly) {
  auto model = model_on(scale_rows_graph(2));
  DataParallel dp(model, on(1));
  auto out = dp.forward({rows(3, 2)});
  EXPECT_EQ(dp.last_run().devices_used, (std::vector<Device>{Device::cpu(0)}));
  EXPECT_FALSE(dp.last_run().replicated);
  EXPECT_TRUE(bitwise_equal(out[0], model->run({rows(3, 2)})[0]));
}

TEST(DataParallel, NoDevicesRunsTheBase) {
  auto model = model_on(scale_rows_graph(2));
  DataParallel dp(model, DataParallelOptions{});
  auto out = dp.forward({rows(3, 2)});
  EXPECT_TRUE(bitwise_equal(out[0], model->run({rows(3, 2)})[0]));
}

TEST(DataParallel, OutputDeviceAndNegativeDim) {
  auto model = model_on(scale_rows_graph(4));
  auto options = on(2);
  options.output_device = Device::cpu(1);
  DataParallel dp(model, options);
  auto out = dp.forward({rows(6, 4)});
  EXPECT_EQ(out[0].device(), Device::cpu(1));

  // Split the feature dim instead: each replica sees [2, 2]; ScaleRows then fails on width.
  auto inner = on(2);
  inner.dim = -1;
  DataParallel by_columns(model, inner);
  EXPECT_THROW(by_columns.forward({rows(2, 4)}), Error);
}

// Records, for each device, the shape and values of the first input its replica's node saw.
class SliceRecorder {
 public:
  NodeObserver observer() {
    NodeObserver obs;
    obs.before = [this](const Node&, Device d, std::span<const Tensor* const> in) {
      std::vector<double> values;
      for (int64_t i = 0; i < in[0]->numel(); ++i) values.push_back(in[0]->item_as_double(i));
      std::lock_guard lock(mutex_);
      seen_[d] = {in[0]->shape(), values};
    };
    return obs;
  }
  std::map<Device, std::pair<Shape, std::vector<double>>> seen() const {
    std::lock_guard lock(mutex_);
    return seen_;
  }

 private:
  mutable std::mutex mutex_;
  std::map<Device, std::pair<Shape, std::vector<double>>> seen_;
};

Tensor iota(Shape shape) {
  Tensor t = Tensor::empty(shape, DType::Float32);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = static_cast<float>(i);
  return t;
}

TEST(DataParallel, DimOneSplitsColumnsAndGathersThemBack) {
  SliceRecorder recorder;
  auto options = on(2);
  options.dim = 1;
  options.observers = {recorder.observer()};
  DataParallel dp(model_on(sum_last_dim_graph(2)), options);
  // x = [[0 1 2 3 4], [5 6 7 8 9]]: torch.chunk gives columns 0..2 and 3..4.
  auto out = dp.forward({iota({2, 5})});
  EXPECT_EQ(dp.last_run().chunk_rows, (std::vector<int64_t>{3, 2}));
  auto seen = recorder.seen();
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_EQ(seen[Device::cpu(0)].first, (Shape{2, 3}));
  EXPECT_EQ(seen[Device::cpu(0)].second, (std::vector<double>{0, 1, 2, 5, 6, 7}));
  EXPECT_EQ(seen[Device::cpu(1)].first, (Shape{2, 2}));
  EXPECT_EQ(seen[Device::cpu(1)].second, (std::vector<double>{3, 4, 8, 9}));
  // Each replica sums its own columns; the [2, 1] results are joined along dim 1.
  expect_values(out[0], {2, 2}, {0 + 1 + 2, 3 + 4, 5 + 6 + 7, 8 + 9});
}

TEST(DataParallel, NegativeDimSplitsTheLastDim) {
  SliceRecorder recorder;
  auto options = on(3);
  options.dim = -1;
  options.observers = {recorder.observer()};
  DataParallel dp(model_on(sum_last_dim_graph(3)), options);
  // x[a][b][c] = 10a + 5b + c, shape [2, 2, 5]: the last dim splits into 2, 2 and 1.
  auto out = dp.forward({iota({2, 2, 5})});
  EXPECT_EQ(dp.last_run().chunk_rows, (std::vector<int64_t>{2, 2, 1}));
  auto seen = recorder.seen();
  ASSERT_EQ(seen.size(), 3u);
  EXPECT_EQ(seen[Device::cpu(0)].first, (Shape{2, 2, 2}));
  EXPECT_EQ(seen[Device::cpu(0)].second, (std::vector<double>{0, 1, 5, 6, 10, 11, 15, 16}));
  EXPECT_EQ(seen[Device::cpu(1)].first, (Shape{2, 2, 2}));
  EXPECT_EQ(seen[Device::cpu(1)].second, (std::vector<double>{2, 3, 7, 8, 12, 13, 17, 18}));
  EXPECT_EQ(seen[Device::cpu(2)].first, (Shape{2, 2, 1}));
  EXPECT_EQ(seen[Device::cpu(2)].second, (std::vector<double>{4, 9, 14, 19}));
  expect_values(out[0], {2, 2, 3}, {1, 5, 4, 11, 15, 9, 21, 25, 14, 31, 35, 19});
  EXPECT_EQ(out[0].device(), Device::cpu(0));
}

TEST(DataParallel, ScalarOutputsAreGatheredIntoAVector) {
  auto model = model_on(scale_rows_graph(2, /*with_total=*/true));
  // Built before the handler is installed: whether 3 devices are unequal depends on the
  // machine's core count, and that warning is tested on its own (Imbalance).
  DataParallel dp(model, on(3));
  std::vector<std::string> warnings;
  auto previous = set_warning_handler([&](const std::string& m) { warnings.push_back(m); });
  reset_warn_once();
  auto out = dp.forward({rows(6, 2)});
  dp.forward({rows(6, 2)});  // the warning is given once per process, as in PyTorch
  set_warning_handler(previous);
  EXPECT_EQ(warnings, (std::vector<std::string>{
                          "was asked to gather along dimension 0, but all input tensors were "
                          "scalars; will instead unsqueeze and return a vector"}));
  ASSERT_EQ(out[1].shape(), (Shape{3}));
  // Replica r sums rows 2r, 2r+1 of x * [1, 2].
  Tensor x = rows(6, 2);
  for (int r = 0; r < 3; ++r) {
    float want = 0;
    for (int i = 4 * r; i < 4 * r + 4; ++i)
      want += x.data<float>()[i] * static_cast<float>(i % 2 + 1);
    EXPECT_FLOAT_EQ(out[1].data<float>()[r], want);
  }
}

TEST(DataParallel, EveryFailingReplicaIsReportedAfterAllFinish) {
  DataParallel dp(model_on(fail_on_graph(2, 0b1010)), on(4));
  try {
    dp.forward({rows(8, 2)});
    FAIL() << "no error";
  } catch (const Error& e) {
    std::string what = e.what();
    EXPECT_NE(what.find("2 of 4 replicas failed"), std::string::npos) << what;
    EXPECT_NE(what.find("replica 1 on cpu:1: [FailOn] node 'FailOn_node': injected failure"),
              std::string::npos)
        << what;
    EXPECT_NE(what.find("replica 3 on cpu:3"), std::string::npos) << what;
    EXPECT_EQ(what.find("replica 0 on"), std::string::npos) << what;
  }
  // The workers are still usable afterwards.
  DataParallel ok(model_on(fail_on_graph(2, 0)), on(4));
  EXPECT_EQ(ok.forward({rows(8, 2)})[0].shape(), (Shape{8, 2}));
}

TEST(DataParallel, OneFailingReplicaOnly) {
  DataParallel dp(model_on(fail_on_graph(2, 0b100)), on(8));
  try {
    dp.forward({rows(16, 2)});
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("1 of 8 replicas failed: replica 2 on cpu:2"),
              std::string::npos)
        << e.what();
  }
}

TEST(ParallelApply, AnExceptionOfAnyTypeIsReportedAfterEveryReplicaIsJoined) {
  auto model = model_on(scale_rows_graph(2));
  auto replicas = replicate(*model, cpus(2));
  std::atomic<bool> slow_replica_finished{false};
  NodeObserver observer;
  observer.before = [](const Node&, Device d, std::span<const Tensor* const>) {
    if (d == Device::cpu(0)) throw 42;  // not a std::exception
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  };
  observer.after = [&](const Node&, Device d, std::span<const Tensor>) {
    if (d == Device::cpu(1)) slow_replica_finished = true;
  };
  ParallelApplyOptions options;
  options.observers = {observer};
  try {
    parallel_apply(replicas, {{rows(2, 2)}, {rows(2, 2, 1)}}, options);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(),
                 "1 of 2 replicas failed: replica 0 on cpu:0: unknown exception (not derived "
                 "from std::exception)");
  }
  // Replica 1 was still sleeping when replica 0 threw: it must have been waited for.
  EXPECT_TRUE(slow_replica_finished.load());
  // The workers are still usable afterwards.
  auto out = parallel_apply(replicas, {{rows(2, 2)}, {rows(2, 2)}});
  EXPECT_EQ(out.size(), 2u);
}

TEST(DataParallel, InPlaceStateUpdatesPersistFromReplicaZeroOnly) {
  auto model = model_on(running_mean_graph(1));
  DataParallel dp(model, on(2));
  Tensor x = Tensor::from_vector<float>({4, 1}, {1, 3, 100, 200});
  dp.forward({x});
  // Replica 0 saw rows {1, 3}: mean 2. Replica 1's update (150) stays on its copy.
  EXPECT_FLOAT_EQ(model->parameter("running").data<float>()[0], 2.0f);
  dp.forward({x});
  EXPECT_FLOAT_EQ(model->parameter("running").data<float>()[0], 4.0f);
}

TEST(DataParallel, ObserversRunOncePerReplicaOnItsDevice) {
  std::mutex mutex;
  std::multiset<Device> before, after;
  std::vector<int64_t> rows_seen;
  NodeObserver observer;
  observer.before = [&](const Node&, Device d, std::span<const Tensor* const> in) {
    std::lock_guard lock(mutex);
    before.insert(d);
    rows_seen.push_back(in[0]->shape()[0]);
    EXPECT_EQ(in[0]->device(), d);
  };
  observer.after = [&](const Node&, Device d, std::span<const Tensor> out) {
    std::lock_guard lock(mutex);
    after.insert(d);
    EXPECT_EQ(out[0].device(), d);
  };
  auto options = on(4);
  options.observers = {observer};
  DataParallel dp(model_on(scale_rows_graph(2)), options);
  dp.forward({rows(8, 2)});
  EXPECT_EQ(before, (std::multiset<Device>{Device::cpu(0), Device::cpu(1), Device::cpu(2),
                                           Device::cpu(3)}));
  EXPECT_EQ(after, before);
  EXPECT_EQ(rows_seen, (std::vector<int64_t>{2, 2, 2, 2}));
}

TEST(DataParallel, ReplicasAreCachedUntilParametersChange) {
  auto model = model_on(scale_rows_graph(2));
  DataParallel dp(model, on(2));
  Tensor x = rows(4, 2);
  dp.forward({x});
  EXPECT_TRUE(dp.last_run().replicated);
  dp.forward({x});
  EXPECT_FALSE(dp.last_run().replicated);
  model->set_parameter("w", Tensor::from_vector<float>({2}, {10, 20}));
  auto out = dp.forward({x});
  EXPECT_TRUE(dp.last_run().replicated);
  // Rows 2..3 ran on replica 1 and must see the new weights.
  EXPECT_FLOAT_EQ(out[0].data<float>()[7], x.data<float>()[7] * 20);
}

// forward_per_replica leaves the outputs where each replica made them; a caller that wrote
// new parameter values into replicas() itself can say so with mark_replicas_current.
TEST(DataParallel, PerReplicaOutputsAndReplicasMarkedCurrent) {
  auto model = model_on(scale_rows_graph(2));
  DataParallel dp(model, on(3));
  EXPECT_TRUE(dp.replicas().empty());
  Tensor x = rows(5, 2);
  auto per_replica = dp.forward_per_replica({x});
  ASSERT_EQ(per_replica.size(), 3u);
  EXPECT_EQ(dp.last_run().chunk_rows, (std::vector<int64_t>{2, 2, 1}));
  for (size_t r = 0; r < 3; ++r) {
    ASSERT_EQ(per_replica[r].size(), 1u);
    EXPECT_EQ(per_replica[r][0].device(), Device::cpu(static_cast<int>(r)));
  }
  EXPECT_TRUE(bitwise_equal(gather(per_replica, Device::cpu(0), 0)[0], dp.forward({x})[0]));
  auto replicas = dp.replicas();
  ASSERT_EQ(replicas.size(), 3u);
  EXPECT_TRUE(replicas[0]->parameters()[0].shares_storage_with(model->parameters()[0]));

  // New weights written into the base and, by hand, into the other replicas.
  Tensor w = Tensor::from_vector<float>({2}, {10, 20});
  model->set_parameter("w", w);
  for (size_t r = 1; r < 3; ++r) {
    Tensor replica_w = replicas[r]->parameters()[0];  // a handle on the replica's storage
    replica_w.copy_from(w);
  }
  dp.mark_replicas_current();
  auto out = dp.forward({x});
  EXPECT_FALSE(dp.last_run().replicated);
  EXPECT_TRUE(bitwise_equal(out[0], model->run({x})[0]));

  DataParallel one(model, on(1));
  auto single = one.forward_per_replica({x});
  ASSERT_EQ(single.size(), 1u);
  EXPECT_TRUE(bitwise_equal(single[0][0], model->run({x})[0]));
  EXPECT_TRUE(one.replicas().empty());
}

TEST(DataParallel, ReplicasThatSatOutACallAreStillRefreshed) {
  auto model = model_on(scale_rows_graph(2));
  DataParallel dp(model, on(4));
  dp.forward({rows(8, 2)});  // all four replicas exist
  model->set_parameter("w", Tensor::from_vector<float>({2}, {10, 20}));
  dp.forward({rows(2, 2)});  // only replicas 0 and 1 run
  Tensor x = rows(8, 2);
  auto out = dp.forward({x});  // replicas 2 and 3 run again
  EXPECT_TRUE(bitwise_equal(out[0], model->run({x})[0]));
}

TEST(DataParallel, ExplicitlyEmptyChunksSkipTheRightReplica) {
  auto model = model_on(scale_rows_graph(2));
  auto options = on(3);
  options.split_policy = SplitPolicy::Weighted;
  options.weights = {1, 1e-9, 1};
  DataParallel dp(model, options);
  dp.forward({rows(4, 2)});
  model->set_parameter("w", Tensor::from_vector<float>({2}, {3, 4}));
  Tensor x = rows(4, 2);
  auto out = dp.forward({x});
  EXPECT_EQ(dp.last_run().devices_used, (std::vector<Device>{Device::cpu(0), Device::cpu(2)}));
  EXPECT_TRUE(bitwise_equal(out[0], model->run({x})[0]));
}

TEST(DataParallel, WithoutCachingEveryCallReplicates) {
  auto options = on(2);
  options.cache_replicas = false;
  DataParallel dp(model_on(scale_rows_graph(2)), options);
  dp.forward({rows(4, 2)});
  dp.forward({rows(4, 2)});
  EXPECT_TRUE(dp.last_run().replicated);
}

TEST(DataParallel, BroadcastInputsByName) {
  auto model = model_on(add_row_graph(3));
  auto options = on(2);
  options.input_splits["row"] = InputSplit::whole();
  DataParallel dp(model, options);
  Tensor x = rows(4, 3);
  Tensor row = Tensor::from_vector<float>({3}, {1, 2, 3});
  auto out = dp.forward({x, row});
  EXPECT_TRUE(bitwise_equal(out[0], model->run(std::vector<Tensor>{x, row})[0]));
  // Without the rule the 3-element row would be split with the batch of 4: an error.
  DataParallel strict(model, on(2));
  EXPECT_THROW(strict.forward({x, row}), Error);
  options.input_splits["nonexistent"] = InputSplit::whole();
  DataParallel bad(model, options);
  EXPECT_THROW(bad.forward({x, row}), Error);
}

TEST(DataParallel, ConcurrentCallersGetTheirOwnResults) {
  auto model = model_on(scale_rows_graph(2));
  DataParallel dp(model, on(4));
  std::atomic<int> wrong{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      for (int i = 0; i < 20; ++i) {
        Tensor x = rows(8 + t, 2, static_cast<float>(t * 100 + i));
        if (!bitwise_equal(dp.forward({x})[0], model->run({x})[0])) ++wrong;
      }
    });
  for (auto& th : threads) th.join();
  EXPECT_EQ(wrong.load(), 0);
}

TEST(DataParallel, FunctionalFormMatches) {
  auto model = model_on(scale_rows_graph(3));
  Tensor x = rows(7, 3);
  EXPECT_TRUE(bitwise_equal(data_parallel(*model, {x}, cpus(4))[0], model->run({x})[0]));
  EXPECT_TRUE(bitwise_equal(data_parallel(*model, {x}, {})[0], model->run({x})[0]));
  EXPECT_EQ(data_parallel(*model, {x}, cpus(2), Device::cpu(1))[0].device(), Device::cpu(1));
}

TEST(Replicate, ReplicaZeroSharesStorageOthersCopy) {
  auto model = model_on(scale_rows_graph(2));
  auto replicas = replicate(*model, cpus(3));
  ASSERT_EQ(replicas.size(), 3u);
  EXPECT_TRUE(replicas[0]->parameters()[0].shares_storage_with(model->parameters()[0]));
  EXPECT_FALSE(replicas[1]->parameters()[0].shares_storage_with(model->parameters()[0]));
  EXPECT_EQ(replicas[2]->parameters()[0].device(), Device::cpu(2));
  EXPECT_EQ(replicas[1]->plan(), model->plan());  // one immutable plan per device type
  EXPECT_THROW(replicate(*model, {Device::cpu(1)}), Error);
}

TEST(DeviceList, CudaDevicesParseInEveryBuild) {
  const std::vector<Device> two_gpus = {Device::cuda(0), Device::cuda(1)};
  EXPECT_EQ(parse_device_list("cuda:0,cuda:1"), two_gpus);
  EXPECT_EQ(parse_device_list("0,1"), two_gpus);
}

TEST(DeviceList, WithoutAUsableGpuCudaDevicesAreRefused) {
#if DPRUN_WITH_CUDA
  if (backend_available(DeviceType::CUDA)) GTEST_SKIP() << "a CUDA GPU is present";
  const std::string why = "no CUDA GPU is present";
  EXPECT_NO_THROW(backend_for(Device::cuda(1)));  // the backend exists; its devices do not
#else
  const std::string why = "this build of dprun has no CUDA support";
  try {
    backend_for(Device::cuda(1));
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), "device cuda:1: " + why);
  }
#endif
  EXPECT_EQ(parse_device_list("all"), parse_device_list("cpu"));
  DataParallelOptions options;
  options.device_ids = {Device::cpu(0), Device::cuda(0)};
  try {
    DataParallel dp(model_on(scale_rows_graph(2)), options);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), "device cuda:0: " + why);
  }
}

TEST(Imbalance, WarnsBelowThreeQuartersOfTheLargest) {
  EXPECT_FALSE(imbalance_warning({{Device::cpu(0), 2, 0}, {Device::cpu(1), 2, 0}}));
  auto m = imbalance_warning({{Device::cuda(0), 132, 80e9}, {Device::cuda(1), 66, 80e9}});
  ASSERT_TRUE(m);
  EXPECT_NE(m->find("cuda:1 has 66 compute units"), std::string::npos) << *m;
  EXPECT_TRUE(imbalance_warning({{Device::cuda(0), 100, 80e9}, {Device::cuda(1), 100, 40e9}}));
  EXPECT_FALSE(imbalance_warning({{Device::cuda(0), 100, 80e9}, {Device::cuda(1), 80, 70e9}}));
}

}  // namespace
}  // namespace dprun
