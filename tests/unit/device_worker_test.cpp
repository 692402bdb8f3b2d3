// Device workers: where run_on_workers runs each task (the caller takes one share itself), that
// a worker may hand work to the others (its own share runs inline, so it never waits on itself),
// and that every failure is reported after every task is joined, whether the caller polls or
// blocks.
#include <gtest/gtest.h>

#include <atomic>
#include <functional>
#include <future>
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

// Runs fn on the worker of `device` and waits for it.
void on_worker(Device device, const std::function<void()>& fn) {
  device_worker(device).submit(fn).get();
}

// The thread of each device's worker, found by running a task on it.
std::thread::id worker_thread(Device device) {
  std::thread::id id;
  on_worker(device, [&] { id = std::this_thread::get_id(); });
  return id;
}

TEST(DeviceWorker, CurrentIsTheWorkerOnItsThreadAndNullElsewhere) {
  EXPECT_EQ(DeviceWorker::current(), nullptr);
  const DeviceWorker* seen = nullptr;
  on_worker(Device::cpu(1), [&] { seen = DeviceWorker::current(); });
  ASSERT_NE(seen, nullptr);
  EXPECT_EQ(seen->device(), Device::cpu(1));
  EXPECT_EQ(seen, &device_worker(Device::cpu(1)));
}

TEST(DeviceWorker, SubmitRunsOnOneLongLivedThreadAndReportsThroughTheFuture) {
  const std::thread::id there = worker_thread(Device::cpu(0));
  EXPECT_NE(there, std::this_thread::get_id());
  EXPECT_EQ(worker_thread(Device::cpu(0)), there);  // the same long-lived thread every time
  std::future<void> done =
      device_worker(Device::cpu(0)).submit([] { throw std::invalid_argument("bad shape"); });
  try {
    done.get();
    FAIL() << "the future did not rethrow";
  } catch (const std::invalid_argument& e) {
    EXPECT_STREQ(e.what(), "bad shape");
  }
}

TEST(DeviceWorker, FromAThreadThatIsNoWorkerTheFirstTaskRunsHereAndTheOthersOnTheirWorkers) {
  std::vector<Device> devices = parse_device_list("cpu:0,cpu:1,cpu:2");
  std::mutex mutex;
  std::map<size_t, std::thread::id> ran_on;
  auto failures = run_on_workers(devices, [&](size_t i) {
    std::lock_guard lock(mutex);
    ran_on[i] = std::this_thread::get_id();
  });
  ASSERT_EQ(failures.size(), 3u);
  for (size_t i = 0; i < 3; ++i) EXPECT_FALSE(failures[i]) << i;
  EXPECT_EQ(ran_on.at(0), std::this_thread::get_id());
  EXPECT_EQ(ran_on.at(1), worker_thread(devices[1]));
  EXPECT_EQ(ran_on.at(2), worker_thread(devices[2]));
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
  on_worker(Device::cpu(0), [&] {
    run_on_workers({Device::cpu(1)}, [&](size_t) { ran_on = std::this_thread::get_id(); });
  });
  EXPECT_EQ(ran_on, worker_thread(Device::cpu(1)));
}

TEST(DeviceWorker, OnAWorkerItsOwnTaskRunsInlineAndTheOthersOnTheirWorkers) {
  std::vector<Device> devices = parse_device_list("cpu:0,cpu:1,cpu:2");
  std::map<size_t, std::thread::id> ran_on;
  std::thread::id caller;
  on_worker(Device::cpu(1), [&] {
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

TEST(DeviceWorker, RunOnWorkersJoinsEveryTaskAndReportsEachFailureWhetherItPollsOrBlocks) {
  // The caller polls while fewer workers are busy than there are hardware threads and blocks
  // otherwise; the tasks outlast the polling (kSpinMicroseconds) so that both joins are used.
  const size_t hardware = std::max(1u, std::thread::hardware_concurrency());
  for (size_t n : {size_t{2}, hardware + 2}) {
    SCOPED_TRACE(n);
    std::vector<Device> devices;
    for (size_t i = 0; i < n; ++i) devices.push_back(Device::cpu(static_cast<int>(i)));
    std::atomic<size_t> finished = 0;
    auto failures = run_on_workers(devices, [&](size_t i) {
      if (i == 0) throw std::runtime_error("first");
      if (i == n - 1) throw 42;  // not derived from std::exception
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      ++finished;
    });
    EXPECT_EQ(finished.load(), n - 2);  // the slow tasks were joined before the failures came
    ASSERT_EQ(failures.size(), n);
    for (size_t i = 1; i + 1 < n; ++i) EXPECT_FALSE(failures[i]) << i;
    ASSERT_TRUE(failures[0]);
    ASSERT_TRUE(failures[n - 1]);
    try {
      std::rethrow_exception(failures[0]);
    } catch (const std::runtime_error& e) {
      EXPECT_STREQ(e.what(), "first");
    }
    try {
      std::rethrow_exception(failures[n - 1]);
    } catch (int v) {
      EXPECT_EQ(v, 42);
    }
  }
}

TEST(DeviceWorker, RunInPartsFromAWorkerRunsItsPartInline) {
  std::vector<Device> devices = parse_device_list("cpu:0,cpu:1");
  std::map<int64_t, std::thread::id> part_thread;
  std::thread::id caller;
  on_worker(Device::cpu(0), [&] {
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
