#pragma once
// One long-lived worker thread per device. Work for several devices runs on their workers,
// so thread-local runtime state (OpenMP teams, oneDNN streams, the core pinning) is created
// once and reused across calls. Work for a single device, asked for by a thread that is no
// device's worker, runs on that thread: a hand-off would buy no concurrency, and it costs a
// wake-up and moving the work's data to another core's caches (one-device inference of
// models/cnn.onnx at batch 8 ran 1.5x slower handed off, a training step of an MLP 1.4x).
//
// A data-parallel training step hands work to the workers and waits for it several times a
// millisecond. Waking a blocked thread costs tens of microseconds on an idle machine and can
// cost a millisecond on a busy one, so a worker polls for its next task for a short while
// (kSpinMicroseconds) before it blocks, and so may a waiting caller (wait_for_task) when a core
// is left for it. A caller that is itself a device's worker runs that device's share inline
// (run_on_workers), so a whole step can run on device_ids[0]'s worker (run_on_worker): the
// caller's thread is then woken once per step, not after every hand-off.
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

namespace dprun {

/// How long a worker polls for the next task, and wait_for_task() for a result, before
/// blocking.
inline constexpr int kSpinMicroseconds = 50;

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

/// Waits until `done` is ready, then returns its result: rethrows the task's exception. With
/// `spin`, polls for kSpinMicroseconds before blocking: worth it only while a core is free for
/// the caller, i.e. when fewer workers are busy than there are hardware threads.
void wait_for_task(std::future<void>& done, bool spin);

/// Whether a caller waiting on `busy_workers` workers may spin (see wait_for_task).
bool may_spin_while(size_t busy_workers);

/// Runs task(i) for every i < devices.size(), each on the worker of devices[i], concurrently,
/// and returns when all are done: one exception per task (null where it succeeded), so the
/// caller can join everything before it reports. A task for the calling worker's own device,
/// a single task asked for by a thread that is no device's worker, and a task that cannot be
/// queued run on the calling thread. The caller spins while it waits when a core is left for
/// it (may_spin_while).
std::vector<std::exception_ptr> run_on_workers(const std::vector<Device>& devices,
                                               const std::function<void(size_t)>& task);

/// Runs fn on the worker of `device` and returns when it is done, rethrowing what it threw;
/// runs it directly when called on that worker.
void run_on_worker(Device device, const std::function<void()>& fn);

}  // namespace dprun
