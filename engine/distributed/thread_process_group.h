#pragma once
// A process group whose ranks are threads of one process: the distributed code paths
// (DistributedDataParallel, rank-failure handling) run and are tested without a launcher.
//
//   auto groups = make_thread_process_groups(2);
//   std::thread other([&] { work(*groups[1]); });   // rank 1
//   work(*groups[0]);                                // rank 0
//   other.join();
#include <memory>
#include <vector>

#include "engine/distributed/process_group.h"

namespace dprun {

/// `size` groups (size >= 1) that form one job: groups[r] is rank r and must be used by one
/// thread at a time. All-reduces always sum in rank order, whatever the ReduceOrder, so results
/// equal ReduceOrder::RankOrder's. abort() ends the whole process with the exit code.
/// With `reduce_devices` (one per rank), rank r sums and broadcasts tensors in
/// reduce_devices[r]'s memory, as an NCCL group does in its GPU's: each contribution is copied
/// to the host on the calling thread's current stream and the result copied back, so the
/// device code paths of the Reducer and DistributedDataParallel run without NCCL (on sim
/// devices, checked for stream races).
std::vector<std::shared_ptr<ProcessGroup>> make_thread_process_groups(
    int size, ProcessGroupOptions options = {}, std::vector<Device> reduce_devices = {});

}  // namespace dprun
