#pragma once
// Ranks that share a host: their number, this rank's place among them, and the share of the
// host's devices each takes (as torch.distributed's launchers give local rank l cuda:l).
#include <cstdint>
#include <vector>

#include "engine/device.h"
#include "engine/distributed/process_group.h"

namespace dprun {

/// A hash of this host's name: equal on the ranks of one host.
uint64_t host_id();

/// This rank's place among the ranks of its host: local rank `rank` of `size`, in rank order.
struct LocalRanks {
  int rank = 0;
  int size = 1;
};

/// Collective: every rank's host_id(), gathered, gives each rank its LocalRanks.
LocalRanks local_ranks(ProcessGroup& group);

/// The block of `devices` that local rank l of L takes: [l n / L, (l + 1) n / L) of the n
/// devices, so each rank has devices of its own. Throws Error when L > n ("3 ranks on this host
/// share 2 devices (cuda:0,cuda:1): each rank needs one of its own; name them with --devices").
std::vector<Device> local_share(const std::vector<Device>& devices, LocalRanks local);

}  // namespace dprun
