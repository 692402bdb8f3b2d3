#include "engine/parallel/device_worker.h"

#include <algorithm>
#include <chrono>
#include <map>
#include <memory>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace dprun {

namespace {

// A hint to the core that this is a spin loop.
inline void relax() {
#if defined(__x86_64__) || defined(__i386__)
  _mm_pause();
#else
  std::this_thread::yield();
#endif
}

// Calls ready() until it returns true or kSpinMicroseconds pass; returns its last answer.
template <class Ready>
bool spin_until(Ready&& ready) {
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::microseconds(kSpinMicroseconds);
  for (int i = 0;; ++i) {
    if (ready()) return true;
    relax();
    if ((i & 63) == 63 && std::chrono::steady_clock::now() > deadline) return ready();
  }
}

thread_local DeviceWorker* current_worker = nullptr;

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

void wait_for_task(std::future<void>& done, bool spin) {
  if (spin)
    spin_until([&] { return done.wait_for(std::chrono::seconds(0)) == std::future_status::ready; });
  done.get();
}

bool may_spin_while(size_t busy_workers) {
  static const size_t hardware = std::max(1u, std::thread::hardware_concurrency());
  return busy_workers < hardware;
}

std::vector<std::exception_ptr> run_on_workers(const std::vector<Device>& devices,
                                               const std::function<void(size_t)>& task) {
  const size_t n = devices.size();
  std::vector<std::exception_ptr> failures(n);
  std::vector<std::future<void>> done(n);
  const DeviceWorker* self = DeviceWorker::current();
  // One task for a caller that is no worker: run below, on this thread (see the header).
  const bool hand_off = n > 1 || self != nullptr;
  size_t queued = 0;
  for (size_t i = 0; i < n && hand_off; ++i) {
    if (self && self->device() == devices[i]) continue;  // below, on this thread
    // The tasks refer to the caller's frame: one that cannot be queued runs below instead of
    // throwing, so that every queued one is joined.
    try {
      done[i] = device_worker(devices[i]).submit([&task, i] { task(i); });
      ++queued;
    } catch (...) {
    }
  }
  for (size_t i = 0; i < n; ++i) {
    if (done[i].valid()) continue;
    try {
      task(i);
    } catch (...) {
      failures[i] = std::current_exception();
    }
  }
  const bool spin = may_spin_while(queued);
  for (size_t i = 0; i < n; ++i) {
    if (!done[i].valid()) continue;
    try {
      wait_for_task(done[i], spin);
    } catch (...) {
      failures[i] = std::current_exception();
    }
  }
  return failures;
}

void run_on_worker(Device device, const std::function<void()>& fn) {
  if (const DeviceWorker* self = DeviceWorker::current(); self && self->device() == device) {
    fn();
    return;
  }
  std::future<void> done = device_worker(device).submit(fn);
  wait_for_task(done, /*spin=*/false);
}

}  // namespace dprun
