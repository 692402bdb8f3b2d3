#pragma once
// Stream order at stream and device boundaries. An accelerator queues work on streams: each
// execution context has its own (a run's), and with no context current the device's default
// stream, whose work the backends wait for before they return (a copy, a collective). Work on
// one stream runs in order; work on two streams is ordered only by an event that one records
// and the other waits for. The engine puts those events where a tensor crosses a boundary,
// never on every node:
//
//  - a run (engine/executor.h) makes its stream wait for the ready events of its inputs and
//    parameters when it starts, and at its end records one event on its stream that becomes
//    the ready event of its outputs and of every tensor it read (hand_over): the next user, on
//    any stream, waits for it; no host synchronisation ends the run;
//  - a copy makes its stream wait for the ready events of its source and destination, and
//    when its stream is one the host does not wait for, hands both on with an event of its own;
//  - a collective does the same for every tensor it reads or writes, on each device.
//
// A tensor's ready event belongs to its storage (shared by views and copies of the handle): the
// point on some stream after which everything the engine queued that touched the memory is
// done, so a reader and a writer alike wait for it.
//
// Memory is reused in stream order (the caching allocators): a block used on a stream other
// than the one it was allocated on is recorded with its allocator when the use is queued
// (record_stream, as in PyTorch), and the allocator does not hand it out again before events
// recorded on those streams at its release have completed.
//
// CPU devices have no streams: every function here returns after comparing a device type, and
// keeps no state for them. A device type with streams registers its StreamOrder (the simulated
// devices, CUDA from its plugin); the simulated devices check every wait (sim_streams.h) and can
// drop each kind on request to show that it is needed (sim_drop_wait.h).
#include <memory>
#include <span>
#include <vector>

#include "engine/device.h"

namespace dprun {

class Tensor;
class Storage;

/// Why a stream waits for an event: the switch that drops it on the simulated devices names it.
enum class StreamWait {
  Copy,        // a copy waits for its source and destination ("copy")
  Collective,  // a collective waits for its tensors ("collective")
  Handover,    // a run waits for its inputs and parameters ("handover")
};

/// A point on one stream: everything queued there before it was recorded.
class StreamEvent {
 public:
  virtual ~StreamEvent() = default;
};

/// The stream operations of one device type. Thread-safe.
class StreamOrder {
 public:
  virtual ~StreamOrder() = default;
  /// An event recorded on the calling thread's current stream of `device`; nullptr when nothing
  /// queued there can still be pending for the host (the default stream, whose work the backend
  /// waits for).
  virtual std::shared_ptr<const StreamEvent> record(Device device) = 0;
  /// Makes the calling thread's current stream of `device` wait for `event`: work queued there
  /// later runs after the event's work. Never blocks the host.
  virtual void wait(Device device, const StreamEvent& event, StreamWait why) = 0;
  /// record_stream: the block at `data` (the start of a storage allocated for `memory`) is used
  /// by work queued on the calling thread's current stream of `stream_device`.
  virtual void record_stream(Device memory, const void* data, Device stream_device) = 0;
};

/// Installs the stream operations of a device type (from its backend's registrar); nullptr
/// removes them (a test's stand-in backend without streams).
void register_stream_order(DeviceType type, StreamOrder* order);
/// The stream operations of a device type; nullptr for the CPU and where none are installed.
StreamOrder* stream_order_for(DeviceType type);

/// Before work on the calling thread's current stream of `stream_device` reads or writes `t`:
/// that stream waits for t's ready event, and t's memory is recorded as used on it.
void use_on_stream(const Tensor& t, Device stream_device, StreamWait why);
/// Records an event on the calling thread's current stream of `device` and makes it the ready
/// event of every defined tensor of `tensors` on an accelerator: work queued there so far that
/// touched them is done once the event is.
void hand_over(std::span<const Tensor* const> tensors, Device device);
/// hand_over of a list of tensors.
void hand_over(std::span<const Tensor> tensors, Device device);

/// The stream ordering of one copy from `src` to `dst`, queued on the current stream of the
/// accelerator side (the destination's when both are): construct before the copy, call done()
/// after it. Nothing for host-to-host copies, and nothing inside a run on the copy's device (the
/// run's hand-over covers its copies).
class CopyOrder {
 public:
  CopyOrder(const Tensor& dst, const Tensor& src);
  /// Hands the destination and the source on with an event of the copy's stream.
  void done();

 private:
  const Tensor& dst_;
  const Tensor& src_;
  Device stream_device_;
  bool active_ = false;
};

/// The stream ordering of one collective over `tensors` (what it reads and writes, each on the
/// device whose current stream its part is queued on): construct before queuing it, call done()
/// after. Each device's current stream waits for the ready events of its tensors; done() hands
/// them on with an event of that stream.
class CollectiveOrder {
 public:
  /// Over `list` and every tensor of `lists` (a broadcast's sources and destinations, a
  /// reduction's outputs and inputs).
  CollectiveOrder(const std::vector<Tensor>& list, const std::vector<std::vector<Tensor>>& lists);
  void done();

 private:
  std::vector<const Tensor*> tensors_;
};

/// For its lifetime the calling thread runs a plan on `device`: its inputs and parameters were
/// waited for by begin(), and end() hands on what it touched. Copies inside it need no events
/// of their own. Nested runs on the same device (a subgraph's) do nothing.
class RunOrder {
 public:
  explicit RunOrder(Device device);
  ~RunOrder();
  RunOrder(const RunOrder&) = delete;
  RunOrder& operator=(const RunOrder&) = delete;
  /// Whether this is the outermost run on the device on this thread, off the CPU.
  bool active() const { return active_; }
  /// Waits for the ready events of `tensors` (on any accelerator) on the run's stream.
  void begin(std::span<const Tensor* const> tensors);
  /// hand_over(tensors, device).
  void end(std::span<const Tensor* const> tensors);

 private:
  Device device_;
  bool active_ = false;
};

/// Called by Storage's destructor for memory off the CPU: forgets its ready event.
void forget_ready_event(const Storage* storage);

}  // namespace dprun
