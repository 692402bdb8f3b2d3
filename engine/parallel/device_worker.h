#pragma once
// One long-lived worker thread per device. Work for several devices runs on their workers,
// so thread-local runtime state (OpenMP teams, oneDNN streams, the core pinning) is created
// once and reused across calls. The calling thread always runs one share itself: its own
// device's when it is a device's worker, else the first device's. A hand-off costs a wake-up
// and moving the work's data to another core's caches (one-device inference of
// models/cnn.onnx at batch 8 ran 1.5x slower handed off), and a caller that handed off every
// share would sleep while the workers ran and then need a core of theirs to wake on: a
// data-parallel step of models/mlp.onnx over two devices at batch 16 took 64-85 us that way,
// 47-51 us with the caller running device_ids[0]'s replica.
//
// A data-parallel training step hands work to the workers and waits for it several times a
// millisecond. Waking a blocked thread costs tens of microseconds on an idle machine and can
// cost a millisecond on a busy one, so a worker polls for its next task for a short while
// (kSpinMicroseconds) before it blocks, and so may a waiting caller (run_on_workers) when a
// core is left for it.
#include <atomic>
#include <condition_variable>
#include <deque>
#include <exception>
#include <functional>
#include <future>
#include <mutex>
#include <thread>
#include <vector>

#include "engine/device.h"
#include "engine/spin_wait.h"

namespace dprun {

class DeviceWorker {
 public:
  explicit DeviceWorker(Device device);
  ~DeviceWorker();
  DeviceWorker(const DeviceWorker&) = delete;
  DeviceWorker& operator=(const DeviceWorker&) = delete;

  Device device() const { return device_; }
  /// The worker whose thread is calling, or nullptr on any other thread.
  static DeviceWorker* current();
  /// Queues `task`; the future reports its completion or rethrows its exception, whatever
  /// its type. Throws only when the task cannot be queued (out of memory).
  std::future<void> submit(std::function<void()> task);

 private:
  void loop();
  Device device_;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<std::packaged_task<void()>> queue_;
  std::atomic<size_t> queued_ = 0;  // queue_.size(), readable without the mutex
  bool sleeping_ = false;           // blocked on wake_ (guarded by mutex_)
  bool stopping_ = false;
  std::thread thread_;
};

/// The process-wide worker of `device` (created on first use). Thread-safe. Throws
/// std::system_error when the worker's thread cannot be started.
DeviceWorker& device_worker(Device device);

/// Runs task(i) for every i < devices.size(), each on the worker of devices[i], concurrently,
/// and returns when all are done: one exception per task (null where it succeeded), so the
/// caller can join everything before it reports. On the calling thread run: the task for the
/// calling worker's own device, or task 0 when the caller is no device's worker, and a task
/// that cannot be queued. While it waits, the caller polls for kSpinMicroseconds before it blocks
/// when a core is left for it (fewer workers busy than hardware threads).
std::vector<std::exception_ptr> run_on_workers(const std::vector<Device>& devices,
                                               const std::function<void(size_t)>& task);

}  // namespace dprun
