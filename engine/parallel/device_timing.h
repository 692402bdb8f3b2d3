#pragma once
// parallel_apply timing the devices' own work, for the weighted split's measurement.
#include <memory>
#include <vector>

#include "engine/parallel/parallel_apply.h"

namespace dprun {

/// parallel_apply, except that each replica's worker waits for its device's queued work before
/// it stops the replica's clock, so `timings` covers the device's time on asynchronous devices
/// (GPU streams) too. parallel_apply itself does not wait: its clock covers the host's time to
/// run the replica and queue its work, which on the CPU is all of it.
std::vector<std::vector<Tensor>> parallel_apply_timing_devices(
    const std::vector<std::shared_ptr<Model>>& replicas,
    const std::vector<std::vector<Tensor>>& inputs, const ParallelApplyOptions& options,
    std::vector<ReplicaTiming>& timings);

}  // namespace dprun
