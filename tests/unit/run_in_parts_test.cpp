// run_in_parts and the host-memory collectives built on it: every element is handled once,
// on the devices' workers, and the results are the same however the work is split.
#include <gtest/gtest.h>

#include <atomic>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <stdexcept>
#include <thread>

#include "engine/model.h"
#include "engine/parallel/comm.h"
#include "engine/parallel/device_list.h"
#include "engine/parallel/replicate.h"
#include "engine/parallel/run_in_parts.h"

namespace dprun {
namespace {

Tensor random_floats(Shape shape, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1, 1);
  std::vector<float> v(static_cast<size_t>(shape_numel(shape)));
  for (auto& x : v) x = dist(rng);
  return Tensor::from_vector<float>(shape, v);
}

TEST(RunInParts, SplitsTheRangeInContiguousPartsOnePerDevice) {
  std::vector<Device> devices = parse_device_list("cpu:0,cpu:1,cpu:2");
  std::mutex mutex;
  std::map<std::pair<int64_t, int64_t>, std::thread::id> ranges;
  run_in_parts(devices, 10, 1, [&](int64_t begin, int64_t end) {
    std::lock_guard lock(mutex);
    ranges[{begin, end}] = std::this_thread::get_id();
  });
  ASSERT_EQ(ranges.size(), 3u);
  // The first part on the caller, the others on their devices' workers.
  EXPECT_EQ(ranges.at({0, 3}), std::this_thread::get_id());
  EXPECT_NE(ranges.at({3, 6}), std::this_thread::get_id());
  EXPECT_NE(ranges.at({6, 10}), std::this_thread::get_id());
  EXPECT_NE(ranges.at({3, 6}), ranges.at({6, 10}));
}

TEST(RunInParts, SmallRangesAndSingleDevicesRunOnTheCaller) {
  for (const char* list : {"cpu:0", "cpu:0,cpu:1"}) {
    SCOPED_TRACE(list);
    std::vector<std::pair<int64_t, int64_t>> ranges;
    std::set<std::thread::id> threads;
    run_in_parts(parse_device_list(list), 100, std::string(list) == "cpu:0" ? 1 : 101,
                 [&](int64_t begin, int64_t end) {
                   ranges.emplace_back(begin, end);
                   threads.insert(std::this_thread::get_id());
                 });
    EXPECT_EQ(ranges, (std::vector<std::pair<int64_t, int64_t>>{{0, 100}}));
    EXPECT_EQ(threads, std::set<std::thread::id>{std::this_thread::get_id()});
  }
  int calls = 0;
  run_in_parts(parse_device_list("cpu:0,cpu:1"), 0, 0, [&](int64_t, int64_t) { ++calls; });
  EXPECT_EQ(calls, 0);
}

TEST(RunInParts, RethrowsTheFirstFailingPartAfterAllFinish) {
  std::atomic<int> finished = 0;
  try {
    run_in_parts(parse_device_list("cpu:0,cpu:1,cpu:2"), 3, 1, [&](int64_t begin, int64_t) {
      ++finished;
      if (begin >= 1) throw std::runtime_error("part " + std::to_string(begin));
    });
    FAIL() << "expected an exception";
  } catch (const std::runtime_error& e) {
    EXPECT_STREQ(e.what(), "part 1");
  }
  EXPECT_EQ(finished.load(), 3);
}

TEST(RunInParts, ForEachPieceCutsARangeAtTensorBoundaries) {
  std::vector<std::tuple<size_t, int64_t, int64_t>> pieces;
  for_each_piece({4, 0, 3, 5}, 2, 10, [&](size_t i, int64_t first, int64_t last) {
    pieces.emplace_back(i, first, last);
  });
  EXPECT_EQ(pieces,
            (std::vector<std::tuple<size_t, int64_t, int64_t>>{{0, 2, 4}, {2, 0, 3}, {3, 0, 3}}));
  EXPECT_EQ(element_counts({Tensor::zeros({2, 3}, DType::Float32), Tensor::scalar<float>(1)}),
            (std::vector<int64_t>{6, 1}));
}

TEST(ReduceAddCoalesced, SumsInDeviceOrderHoweverTheWorkIsSplit) {
  std::vector<Device> devices = parse_device_list("cpu:0,cpu:1,cpu:2");
  // Big enough to be split (more than 2^15 elements in all), with a float64 tensor too.
  std::vector<std::vector<Tensor>> inputs;
  for (uint32_t d = 0; d < 3; ++d)
    inputs.push_back({random_floats({300, 100}, 10 + d), random_floats({7}, 20 + d),
                      random_floats({5, 5}, 30 + d).to(devices[d]),
                      Tensor::from_vector<double>({2}, {d + 1.0, d == 0   ? 1e16
                                                                 : d == 1 ? -1e16
                                                                          : 1})});
  std::vector<Tensor> split = reduce_add_coalesced(inputs, devices[0], devices);
  std::vector<Tensor> single = reduce_add_coalesced(inputs, devices[0]);
  ASSERT_EQ(split.size(), 4u);
  for (size_t k = 0; k < 3; ++k) {
    EXPECT_EQ(split[k].device(), devices[0]);
    for (int64_t i = 0; i < split[k].numel(); ++i) {
      float want = (inputs[0][k].data<float>()[i] + inputs[1][k].data<float>()[i]) +
                   inputs[2][k].data<float>()[i];
      ASSERT_EQ(split[k].data<float>()[i], want) << k << "[" << i << "]";
      ASSERT_EQ(single[k].data<float>()[i], want) << k << "[" << i << "]";
    }
  }
  // (1e16 - 1e16) + 1 = 1 in device order; (-1e16 + 1) + 1e16 would give 0.
  EXPECT_EQ(split[3].data<double>()[0], 6.0);
  EXPECT_EQ(split[3].data<double>()[1], 1.0);
  inputs[2].pop_back();
  EXPECT_THROW(reduce_add_coalesced(inputs, devices[0], devices), Error);
}

TEST(RefreshReplicas, CopiesEveryParameterIntoEveryReplica) {
  auto graph = std::make_shared<Graph>();
  graph->opset_imports[""] = 17;
  graph->inputs.push_back({"x", {DType::Float32, SymbolicShape{Dim::named("n")}}});
  graph->initializers["a"] = random_floats({400, 100}, 1);
  graph->initializers["b"] = random_floats({3}, 2);
  Node add;
  add.op_type = "Add";
  add.name = "add";
  add.inputs = {"x", "b"};
  add.outputs = {"y"};
  graph->nodes = {add};
  graph->outputs.push_back({"y", {DType::Float32, std::nullopt}});
  std::vector<Device> devices = parse_device_list("cpu:0,cpu:1,cpu:2");
  Model base(graph, devices[0]);
  auto replicas = replicate(base, devices);
  base.set_parameter("a", random_floats({400, 100}, 3));
  base.set_parameter("b", random_floats({3}, 4));
  refresh_replicas(base, {replicas[1].get(), replicas[2].get()}, devices);
  for (size_t r = 1; r < 3; ++r)
    for (const std::string name : {"a", "b"}) {
      Tensor want = base.parameter(name), got = replicas[r]->parameter(name);
      EXPECT_FALSE(got.shares_storage_with(want));
      for (int64_t i = 0; i < want.numel(); ++i)
        ASSERT_EQ(got.data<float>()[i], want.data<float>()[i]) << name << "[" << i << "]";
    }
}

}  // namespace
}  // namespace dprun
