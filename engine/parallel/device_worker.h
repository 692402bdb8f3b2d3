#pragma once
// One long-lived worker thread per device. Work for a device always runs on its worker, so
// thread-local runtime state (OpenMP teams, oneDNN streams, the core pinning) is created once
// and reused across calls.
#include <condition_variable>
#include <deque>
#include <functional>
#include <future>
#include <mutex>
#include <thread>

#include "engine/device.h"

namespace dprun {

class DeviceWorker {
 public:
  explicit DeviceWorker(Device device);
  ~DeviceWorker();
  DeviceWorker(const DeviceWorker&) = delete;
  DeviceWorker& operator=(const DeviceWorker&) = delete;

  Device device() const { return device_; }
  /// Queues `task`; the future reports its completion or rethrows its exception, whatever
  /// its type. Throws only when the task cannot be queued (out of memory).
  std::future<void> submit(std::function<void()> task);

 private:
  void loop();
  Device device_;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<std::packaged_task<void()>> queue_;
  bool stopping_ = false;
  std::thread thread_;
};

/// The process-wide worker of `device` (created on first use). Thread-safe. Throws
/// std::system_error when the worker's thread cannot be started.
DeviceWorker& device_worker(Device device);

}  // namespace dprun
