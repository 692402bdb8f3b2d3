#include "engine/parallel/device_worker.h"

#include <algorithm>
#include <chrono>
#include <map>
#include <memory>

#include "engine/spin_wait.h"

namespace dprun {

namespace {

thread_local DeviceWorker* current_worker = nullptr;

// Whether a caller waiting on `busy_workers` workers may poll for their results: only while a
// core is free for it.
bool may_spin_while(size_t busy_workers) {
  static const size_t hardware = std::max(1u, std::thread::hardware_concurrency());
  return busy_workers < hardware;
}

}  // namespace

DeviceWorker* DeviceWorker::current() {
  return current_worker;
}

DeviceWorker::DeviceWorker(Device device) : device_(device), thread_([this] { loop(); }) {}

DeviceWorker::~DeviceWorker() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

std::future<void> DeviceWorker::submit(std::function<void()> task) {
  std::packaged_task<void()> packaged(std::move(task));
  std::future<void> done = packaged.get_future();
  bool sleeping;
  {
    std::lock_guard lock(mutex_);
    queue_.push_back(std::move(packaged));
    queued_.store(queue_.size(), std::memory_order_release);
    sleeping = sleeping_;
  }
  if (sleeping) wake_.notify_one();  // a spinning worker sees queued_ change by itself
  return done;
}

void DeviceWorker::loop() {
  current_worker = this;
  for (;;) {
    spin_until([this] { return queued_.load(std::memory_order_acquire) > 0; });
    std::packaged_task<void()> task;
    {
      std::unique_lock lock(mutex_);
      sleeping_ = true;
      wake_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
      sleeping_ = false;
      if (queue_.empty()) return;
      task = std::move(queue_.front());
      queue_.pop_front();
      queued_.store(queue_.size(), std::memory_order_release);
    }
    task();  // exceptions of every type are stored in the task's future, never thrown here
  }
}

DeviceWorker& device_worker(Device device) {
  static std::mutex mutex;
  static std::map<Device, std::unique_ptr<DeviceWorker>> workers;
  std::lock_guard lock(mutex);
  auto& slot = workers[device];
  if (!slot) slot = std::make_unique<DeviceWorker>(device);
  return *slot;
}

std::vector<std::exception_ptr> run_on_workers(const std::vector<Device>& devices,
                                               const std::function<void(size_t)>& task) {
  const size_t n = devices.size();
  std::vector<std::exception_ptr> failures(n);
  auto run_task = [&](size_t i) {
    try {
      task(i);
    } catch (...) {
      failures[i] = std::current_exception();
    }
  };
  // Queued tasks count down as they finish, their last touch of this frame: a spinning caller
  // sees the end on one cache line, without the futures' locking. The futures serve a caller
  // that blocks.
  std::atomic<size_t> running = 0;
  std::vector<std::future<void>> done(n);
  const DeviceWorker* self = DeviceWorker::current();
  for (size_t i = 0; i < n; ++i) {
    if (self ? self->device() == devices[i] : i == 0) continue;  // below, on this thread
    // The tasks refer to this frame: one that cannot be queued runs below instead of
    // throwing, so that every queued one is joined.
    running.fetch_add(1, std::memory_order_relaxed);
    try {
      done[i] = device_worker(devices[i]).submit([&run_task, &running, i] {
        run_task(i);
        running.fetch_sub(1, std::memory_order_release);
      });
    } catch (...) {
      running.fetch_sub(1, std::memory_order_relaxed);
    }
  }
  size_t queued = 0;
  for (size_t i = 0; i < n; ++i) {
    if (done[i].valid())
      ++queued;
    else
      run_task(i);
  }
  if (queued == 0) return failures;
  if (may_spin_while(queued) &&
      spin_until([&] { return running.load(std::memory_order_acquire) == 0; }))
    return failures;
  for (auto& d : done)
    if (d.valid()) d.wait();
  return failures;
}

}  // namespace dprun
