#pragma once
// The execution resource of a CPU virtual device: the calling thread's OpenMP team, sized to
// the device's intra-op threads. CPU kernels reach their intra-op parallelism through it
// (ExecutionContext::parallel_for); oneDNN primitives run on the same team, because they
// follow the calling thread's OpenMP thread count.
#include "engine/execution_context.h"

namespace dprun {

class CpuExecutionContext final : public ExecutionContext {
 public:
  /// Binds the calling thread to `device`. With config.device_count > 0 the thread and its
  /// OpenMP team are pinned to the device's core share (cpu_core_share(device.index,
  /// device_count)), and threads() is config.threads or the share's size; the pinning is kept
  /// after the context ends (a worker thread serves one device) and redone only when the
  /// share or thread count changes. With device_count == 0 nothing is pinned, and threads()
  /// is config.threads or the thread's current OpenMP setting. The thread's OpenMP thread
  /// count is set to threads() and restored when the context is destroyed.
  CpuExecutionContext(Device device, const ExecutionConfig& config);
  ~CpuExecutionContext() override;

  Device device() const override { return device_; }
  /// The configured threads, or 1 inside run_on_one_thread.
  int threads() const override { return serial_depth_ > 0 ? 1 : threads_; }
  /// Splits [0, n) evenly over min(threads(), ceil(n / grain)) OpenMP threads.
  void parallel_for(int64_t n, int64_t grain,
                    const std::function<void(int64_t, int64_t)>& fn) const override;
  /// Sets the thread's OpenMP thread count to 1 while fn runs (restored even if it throws).
  void run_on_one_thread(const std::function<void()>& fn) const override;
  void synchronize() override {}

 private:
  Device device_;
  int threads_ = 1;
  mutable int serial_depth_ = 0;  // run_on_one_thread calls in progress
  int saved_threads_ = 1;
};

}  // namespace dprun
