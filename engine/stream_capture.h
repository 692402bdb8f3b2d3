#pragma once
// Capturing a run's work on a stream as a graph and replaying it (CUDA graphs). While the
// calling thread's current stream of a device captures, work queued there is recorded instead
// of run, and every allocation made on that stream comes from the capture's private memory pool:
// blocks freed inside the capture may be handed out again inside it, and no block of the pool
// goes to anyone else while the graph lives, so a replay finds each buffer where the capture
// left it. A copy from host memory into the capture (a value of shape arithmetic, computed on
// the host) reads that memory again at every replay: the graph keeps it (keep(), called by every
// Tensor copy, stream_order.h's CopyOrder), so its bytes stay as they were at capture. A
// capture breaks when the host waits for the capturing stream (a synchronisation, a copy to the
// host), when it copies from host memory it does not keep, or when an allocation made for it
// comes from elsewhere than its pool; end() then throws, naming the rule, and the device stays
// usable.
//
// A device type with streams registers its StreamCapture (CUDA from its plugin, the simulated
// devices); engine/plan_graphs.h decides which runs are captured and replayed.
#include <functional>
#include <memory>

#include "engine/device.h"

namespace dprun {

class Tensor;

/// Captured work, replayable on the device it was captured on.
class CapturedGraph {
 public:
  virtual ~CapturedGraph() = default;
  /// Queues the captured work on the calling thread's current stream of its device. A device
  /// that keeps the captured work (CUDA) launches it; one whose kernels ran when they were
  /// queued (the simulated devices) calls `rerun`, which must queue the captured work again
  /// (the same run), and checks that it repeats the capture: each allocation asks for what it
  /// asked for at capture and is given the same address. Throws Error when the replay fails.
  virtual void replay(const std::function<void()>& rerun) = 0;
  /// Whether the capture ran the work as it captured it (the simulated devices), so that the
  /// run that captured has its results without a replay; a GPU's capture runs nothing.
  virtual bool ran_at_capture() const = 0;
};

/// The capture operations of one device type. Thread-safe; a capture belongs to the thread
/// that began it.
class StreamCapture {
 public:
  virtual ~StreamCapture() = default;
  /// Starts capturing the work the calling thread queues on its current stream of `device`,
  /// which must be an execution context's (not a default stream). Throws Error when it cannot.
  virtual void begin(Device device) = 0;
  /// Ends the calling thread's capture on `device`: the graph, or Error naming the first rule
  /// the capture broke (the capture is discarded, the device usable).
  virtual std::unique_ptr<CapturedGraph> end(Device device) = 0;
  /// Discards the calling thread's capture on `device`, if any (a run that failed).
  virtual void abort(Device device) noexcept = 0;
  /// Whether the calling thread's current stream of `device` is capturing (or, on the
  /// simulated devices, replaying).
  virtual bool capturing(Device device) = 0;
  /// The calling thread's capture on `device` copies from `host` (host memory): its graph keeps
  /// the tensor's memory as long as it lives.
  virtual void keep(Device device, const Tensor& host) = 0;
};

/// Installs the capture operations of a device type (from its backend's registrar).
void register_stream_capture(DeviceType type, StreamCapture* capture);
/// The capture operations of a device type; nullptr where the type has none (the CPU).
StreamCapture* stream_capture_for(DeviceType type);
/// Whether the calling thread's current stream of `device` is capturing: a copy from host
/// memory then asks the capture to keep that memory (stream_order.h's CopyOrder).
bool stream_capturing(Device device);

}  // namespace dprun
