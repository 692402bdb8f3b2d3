#pragma once
// The streams of the simulated devices, kept as a GPU's would be so that an ordering fault
// fails on a machine without one. Sim work runs at once, but every kernel and copy is booked
// on a stream as if it were queued there: the calling thread's current stream of the device
// (an execution context's, like CudaExecutionContext's, for the context's lifetime), or the
// device's default stream when no context is current. Work is done, as far as anyone may rely
// on, only once the host has waited for it: ExecutionContext::synchronize (its stream up to
// now), Backend::synchronize (every stream of the device), a copy that waits (to the host,
// between devices, or on the default stream, as the CUDA backend's copies wait) or a
// collective (which waits for what it read and wrote). SimMemory checks each access against
// this (sim_memory.h).
//
// A stream can also wait for an event of another stream (sim_record, sim_wait), as
// cudaStreamWaitEvent does: work booked on it afterwards is ordered after the event's work, and
// after whatever that stream had waited for in turn, and when the host waits for it, the host
// has waited for that work too.
//
// Stricter than CUDA in one respect: each execution context gets a stream of its own, where
// the CUDA backend lends pooled streams, so work left unsynchronized by one context is not
// assumed ordered before the next context that happens to get the same stream.
#include <cstdint>
#include <map>
#include <string>

#include "engine/device.h"

namespace dprun {

/// A simulated stream: 1, 2, ... in order of creation, unique in the process.
using SimStreamId = uint64_t;

/// The `seq`-th piece of work (from 1) booked on `stream`.
struct SimStreamPoint {
  SimStreamId stream = 0;
  uint64_t seq = 0;
};

/// Makes a new stream of `device` the calling thread's current one there for the lifetime of
/// the object, then restores the previous one. The stream of one execution context.
class SimStreamScope {
 public:
  explicit SimStreamScope(Device device);
  ~SimStreamScope();
  SimStreamScope(const SimStreamScope&) = delete;
  SimStreamScope& operator=(const SimStreamScope&) = delete;
  SimStreamId stream() const { return stream_; }

 private:
  Device device_;
  SimStreamId stream_;
  SimStreamId previous_;
};

/// The calling thread's current stream of simulated `device` (its default stream when no
/// SimStreamScope of the device is open on the thread).
SimStreamId sim_current_stream(Device device);
/// Whether `stream` is a device's default stream.
bool sim_is_default_stream(SimStreamId stream);
/// Books the next piece of work on `stream`.
SimStreamPoint sim_book(SimStreamId stream);
/// The host has waited for everything booked on `stream` so far.
void sim_complete(SimStreamId stream);
/// The host has waited for everything booked on every stream of `device` so far.
void sim_complete_device(Device device);
/// Whether the host has waited for the work at `point`.
bool sim_done(const SimStreamPoint& point);
/// Whether the work at `earlier` is ordered before work booked now on `later`: the same stream,
/// work the host has waited for, or work `later` has waited for through events.
bool sim_ordered(const SimStreamPoint& earlier, SimStreamId later);
/// Whether everything booked on `stream` is done.
bool sim_idle(SimStreamId stream);

/// An event: the work booked on a stream so far, and what that stream had waited for.
struct SimEventPoint {
  SimStreamId stream = 0;
  std::map<SimStreamId, uint64_t> clock;  // per stream, the work ordered before the event
};
/// Records an event on `stream` (books no work).
SimEventPoint sim_record(SimStreamId stream);
/// Makes `stream` wait for `event`: work booked on it from now on is ordered after the event.
void sim_wait(SimStreamId stream, const SimEventPoint& event);
/// "stream 3 of sim:0", "the default stream of sim:0".
std::string sim_stream_name(SimStreamId stream);

}  // namespace dprun
