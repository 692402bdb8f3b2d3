#pragma once
// Ranks that share a host share its cores. A launcher that binds each rank to cores of its own
// (mpirun binds 1 or 2 ranks to a core each) needs nothing more; one that leaves every rank
// all the cores (mpirun with more ranks than cores) would have each rank's CPU devices pin
// their threads to the same first cores. share_host_cores() splits them instead.
#include <vector>

#include "engine/distributed/local_ranks.h"
#include "engine/distributed/process_group.h"

namespace dprun {

/// Collective. The ranks on this host (same host name; `local`, from local_ranks) whose CPU
/// affinity masks are identical split that mask as CPU devices split a process's cores: local
/// rank l of L takes the block
/// [l C / L, (l + 1) C / L) of the C cores when L <= C, else core l mod C. Restricts the
/// calling thread to its share, so call it before any CPU device is used: the CPU backend and
/// the threads created later then see only the share. Returns this rank's cores: the share, or
/// the unchanged mask when the launcher already gave the ranks different ones.
std::vector<int> share_host_cores(ProcessGroup& group, LocalRanks local);

}  // namespace dprun
