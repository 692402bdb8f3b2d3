#pragma once
// Graph capture on the simulated devices (engine/stream_capture.h): capture is a mode of a sim
// stream. Sim kernels run when they are queued, so a capture runs the work as a plain run does
// and checks the rules a CUDA graph capture imposes, and a replay runs the captured work again
// (CapturedGraph::replay's `rerun`) with each allocation given the address it got at capture,
// from the graph's private pool (SimGraphPool, sim_memory.h), as a real replay assumes.
//
// While a stream captures or replays, these fail the capture, throwing Error naming the rule
// (and the first one broken is what StreamCapture::end reports):
//  - a host wait for the stream (sim_complete: ExecutionContext::synchronize, a copy that waits,
//    a collective's wait), or for every stream of its device from the capturing thread;
//  - an allocation of the device's memory by the capturing thread on another stream, which the
//    graph's pool would not serve;
//  - a copy from host memory into the device on the stream that the capture does not keep
//    (StreamCapture::keep): a replay would read that host memory again, after it is freed.
#include <memory>

#include "engine/backends/sim/sim_streams.h"
#include "engine/device.h"

namespace dprun {

struct SimGraphPool;

/// The pool that serves allocations on `stream` of `device`: the graph's while the stream
/// captures or replays, nullptr otherwise. Throws Error, failing the capture, when the calling
/// thread captures on `device` on another stream.
std::shared_ptr<SimGraphPool> sim_allocation_pool(Device device, SimStreamId stream);
/// The host is about to wait for `stream`: throws Error, failing its capture, when it captures.
void sim_check_host_wait(SimStreamId stream);
/// The host is about to wait for every stream of `device`: throws Error, failing the capture,
/// when the calling thread captures on the device.
void sim_check_device_wait(Device device);
/// A copy from host memory at `src` is about to be booked on `stream` of `device`: throws
/// Error, failing its capture, when it captures and does not keep that memory.
void sim_check_copy_from_host(Device device, SimStreamId stream, const void* src);

}  // namespace dprun
