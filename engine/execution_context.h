#pragma once
// The execution resource of one device for one run: what a kernel needs besides its inputs
// and outputs to do its work. On a CPU device that is the run's share of host threads (an
// OpenMP team, which oneDNN follows too); on a GPU it is a stream and the library handles
// bound to it. A Backend creates one for (device, config) on the thread that will use it; the
// executor holds it for the run and every KernelContext of the run refers to it.
//
// Ownership: the creator owns the context (std::unique_ptr) and destroys it on the same thread.
// The executor creates one per run unless RunOptions::context supplies one; parallel_apply
// creates one per replica on the device's worker thread and passes it in, so it can wait for
// the device before it stops the replica's clock. Kernels that run subgraphs pass their own
// context on, so the subgraph's work joins the same stream or thread team.
#include <cstdint>
#include <functional>

#include "engine/device.h"

namespace dprun {

/// What a run asks of its device's execution resource.
struct ExecutionConfig {
  /// Host threads for intra-op work. 0 picks the device's default: on a CPU device the core
  /// share when `device_count` > 0, else the calling thread's current setting. GPUs ignore it.
  int threads = 0;
  /// Devices of this type working side by side (CPU virtual devices split the cores between
  /// them, and the calling thread is pinned to its device's share). 0 means the run is not part
  /// of a device set: the calling thread stays where it runs.
  int device_count = 0;
};

/// Per-run execution resource of one device. Not thread-safe: one run (with the subgraph runs
/// its kernels make) uses it at a time, on the thread that created it.
class ExecutionContext {
 public:
  virtual ~ExecutionContext() = default;
  ExecutionContext(const ExecutionContext&) = delete;
  ExecutionContext& operator=(const ExecutionContext&) = delete;

  /// The device this context runs work for.
  virtual Device device() const = 0;
  /// Host threads the kernels of this context may use for intra-op work (at least 1).
  virtual int threads() const = 0;
  /// Runs fn(begin, end) over [0, n) on the context's host threads, in chunks of at least
  /// `grain` items; serially when one thread is configured, the range is small, or the caller
  /// is already inside a parallel loop. The chunks partition [0, n) in order. If fn throws,
  /// every chunk still finishes and the first exception is rethrown. This base version runs
  /// the whole range on the calling thread.
  virtual void parallel_for(int64_t n, int64_t grain,
                            const std::function<void(int64_t, int64_t)>& fn) const;
  /// Runs fn on the calling thread with the context's intra-op parallelism turned off: inside,
  /// parallel_for runs serially and, on a CPU device, work that follows the thread's OpenMP
  /// thread count (oneDNN primitives, created or executed there) sees one thread. For work too
  /// small to repay splitting it. This base version just runs fn.
  virtual void run_on_one_thread(const std::function<void()>& fn) const { fn(); }
  /// Blocks until all work queued on this context has finished (kernels on a GPU stream are
  /// asynchronous; CPU kernels finish before they return, so there it returns at once).
  virtual void synchronize() = 0;

 protected:
  ExecutionContext() = default;
};

}  // namespace dprun
