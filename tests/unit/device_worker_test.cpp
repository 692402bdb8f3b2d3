// Device workers: where run_on_workers and run_on_worker run each task, that a worker may hand
// work to the others (its own share runs inline, so it never waits on itself), and that every
// failure is reported after every task is joined.
#include <gtest/gtest.h>

#include <atomic>
#include <map>
#include <mutex>
#include <stdexcept>
#include <thread>

#include "engine/error.h"
#include "engine/parallel/device_list.h"
#include "engine/parallel/device_worker.h"
#include "engine/parallel/run_in_parts.h"

namespace dprun {
namespace {

// The thread of each device's worker, found by running a task on it.
std::thread::id worker_thread(Device device) {
  std::thread::id id;
  run_on_worker(device, [&] { id = std::this_thread::get_id(); });
  return id;
}

TEST(DeviceWorker, CurrentIsTheWorkerOnItsThreadAndNullElsewhere) {
  EXPECT_EQ(DeviceWorker::current(), nullptr);
  const DeviceWorker* seen = nullptr;
  run_on_worker(Device::cpu(1), [&] { seen = DeviceWorker::current(); });
  ASSERT_NE(seen, nullptr);
  EXPECT_EQ(seen->device(), Device::cpu(1));
  EXPECT_EQ(seen, &device_worker(Device::cpu(1)));
}

TEST(DeviceWorker, RunOnWorkerRunsThereAndRethrows) {
  const std::thread::id there = worker_thread(Device::cpu(0));
  EXPECT_NE(there, std::this_thread::get_id());
  EXPECT_EQ(worker_thread(Device::cpu(0)), there);  // the same long-lived thread every time
  try {
    run_on_worker(Device::cpu(0), [] { throw std::invalid_argument("bad shape"); });
    FAIL() << "run_on_worker did not rethrow";
  } catch (const std::invalid_argument& e) {
    EXPECT_STREQ(e.what(), "bad shape");
  }
  // Nested: a task on the worker that asks for its own worker runs inline instead of waiting.
  std::thread::id inner;
  run_on_worker(Device::cpu(0), [&] {
    run_on_worker(Device::cpu(0), [&] { inner = std::this_thread::get_id(); });
  });
  EXPECT_EQ(inner, there);
}

TEST(DeviceWorker, RunOnWorkersRunsEachTaskOnItsDevicesWorker) {
  std::vector<Device> devices = parse_device_list("cpu:0,cpu:1,cpu:2");
  std::mutex mutex;
  std::map<size_t, std::thread::id> ran_on;
  auto failures = run_on_workers(devices, [&](size_t i) {
    std::lock_guard lock(mutex);
    ran_on[i] = std::this_thread::get_id();
  });
  ASSERT_EQ(failures.size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_FALSE(failures[i]) << i;
    EXPECT_EQ(ran_on.at(i), worker_thread(devices[i])) << i;
  }
}

TEST(DeviceWorker, ASingleTaskRunsOnTheCallingThreadUnlessItIsAnotherDevicesWorker) {
  const std::thread::id caller = std::this_thread::get_id();
  std::thread::id ran_on;
  auto failures = run_on_workers({Device::cpu(1)}, [&](size_t) {
    ran_on = std::this_thread::get_id();
    EXPECT_EQ(DeviceWorker::current(), nullptr);
  });
  ASSERT_EQ(failures.size(), 1u);
  EXPECT_FALSE(failures[0]);
  EXPECT_EQ(ran_on, caller);
  // Its failure is reported like a queued task's.
  failures = run_on_workers({Device::cpu(1)}, [](size_t) { throw std::runtime_error("no"); });
  ASSERT_TRUE(failures[0]);
  EXPECT_EQ(error_message(failures[0]), "no");
  // From cpu:0's worker, a single task for cpu:1 is handed to cpu:1's worker.
  run_on_worker(Device::cpu(0), [&] {
    run_on_workers({Device::cpu(1)}, [&](size_t) { ran_on = std::this_thread::get_id(); });
  });
  EXPECT_EQ(ran_on, worker_thread(Device::cpu(1)));
}

TEST(DeviceWorker, OnAWorkerItsOwnTaskRunsInlineAndTheOthersOnTheirWorkers) {
  std::vector<Device> devices = parse_device_list("cpu:0,cpu:1,cpu:2");
  std::map<size_t, std::thread::id> ran_on;
  std::thread::id caller;
  run_on_worker(Device::cpu(1), [&] {
    caller = std::this_thread::get_id();
    std::mutex mutex;
    auto failures = run_on_workers(devices, [&](size_t i) {
      std::lock_guard lock(mutex);
      ran_on[i] = std::this_thread::get_id();
    });
    for (const auto& f : failures) EXPECT_FALSE(f);
  });
  EXPECT_EQ(ran_on.at(1), caller);
  EXPECT_EQ(ran_on.at(0), worker_thread(Device::cpu(0)));
  EXPECT_EQ(ran_on.at(2), worker_thread(Device::cpu(2)));
}

TEST(DeviceWorker, RunOnWorkersJoinsEveryTaskAndReportsEachFailure) {
  std::vector<Device> devices = parse_device_list("cpu:0,cpu:1,cpu:2");
  std::atomic<int> finished = 0;
  auto failures = run_on_workers(devices, [&](size_t i) {
    if (i == 0) throw std::runtime_error("first");
    if (i == 2) throw 42;  // not derived from std::exception
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    ++finished;
  });
  EXPECT_EQ(finished.load(), 1);  // the slow task was joined before the failures came back
  ASSERT_EQ(failures.size(), 3u);
  ASSERT_TRUE(failures[0]);
  EXPECT_FALSE(failures[1]);
  ASSERT_TRUE(failures[2]);
  try {
    std::rethrow_exception(failures[0]);
  } catch (const std::runtime_error& e) {
    EXPECT_STREQ(e.what(), "first");
  }
  try {
    std::rethrow_exception(failures[2]);
  } catch (int v) {
    EXPECT_EQ(v, 42);
  }
}

TEST(DeviceWorker, RunInPartsFromAWorkerRunsItsPartInline) {
  std::vector<Device> devices = parse_device_list("cpu:0,cpu:1");
  std::map<int64_t, std::thread::id> part_thread;
  std::thread::id caller;
  run_on_worker(Device::cpu(0), [&] {
    caller = std::this_thread::get_id();
    std::mutex mutex;
    run_in_parts(devices, 100, 1, [&](int64_t begin, int64_t) {
      std::lock_guard lock(mutex);
      part_thread[begin] = std::this_thread::get_id();
    });
  });
  ASSERT_EQ(part_thread.size(), 2u);
  EXPECT_EQ(part_thread.at(0), caller);
  EXPECT_EQ(part_thread.at(50), worker_thread(Device::cpu(1)));
}

}  // namespace
}  // namespace dprun
