#pragma once
// The process group of a job whose ranks each train on one GPU: gradients are all-reduced and
// GPU tensors broadcast by NCCL in GPU memory (torch.distributed's "nccl" backend); everything
// else (host tensors, gathers, barriers, abort) goes through the group it was made from, which
// also carries the NCCL communicator's unique id from rank 0 to the others.
//
//   auto world = mpi_world_process_group();                  // mpirun -np N ...
//   auto group = nccl_process_group(world, Device::cuda(0));  // this rank's GPU
//   DistributedDataParallel ddp(model, options, group);       // buckets live on cuda:0
//
// All-reduces. all_reduce_sum takes a float32 or float64 tensor in the GPU's memory. It queues,
// on a stream of the group, a wait for the work queued so far on the calling thread's current
// stream of the GPU, then the NCCL call, then an event; the call returns at once and the work
// completes when the event does. ReduceOrder::Any is one ncclAllReduce (ring or tree, summed in
// NCCL's order). ReduceOrder::RankOrder is an ncclAllGather of every rank's tensor followed by
// a kernel that adds them in rank order, ((x0 + x1) + x2) + ..., the MPI group's rank-order
// result bit for bit; it moves (n-1) times the tensor per rank where a ring moves 2(n-1)/n, the
// price of a fixed order.
//
// Broadcasts. broadcast of a tensor in the GPU's memory is an ncclBroadcast of its bytes,
// queued as an all-reduce is, and waited for before it returns.
//
// Failures. A wait polls the work's event and NCCL's asynchronous error; when the group's
// timeout passes first, or NCCL reports an error (a peer gone), the communicator is aborted
// (ncclCommAbort, so nothing stays queued behind it) and the wait throws Error naming the
// rank, the GPU and the cause; the group is unusable after that.
//
// One communicator per group, on one GPU, used by one thread at a time (ProcessGroup's rule).
// Its collectives must not run at the same time as another communicator's on the same GPU
// (NCCL's rule for concurrent communicators): DistributedDataParallel waits for its buckets
// before the next step's broadcasts and replica sums.
#include <memory>

#include "engine/distributed/process_group.h"

namespace dprun {

/// True when this build of dprun can make NCCL process groups: its CUDA plugin
/// (engine/cuda_plugin.h) loads, opened here if it was not yet.
bool nccl_supported();

/// Collective over `bootstrap`'s ranks: every rank calls it with its own GPU (one GPU per rank
/// and no GPU twice on a host: NCCL's rule). Makes the communicator (ncclCommInitRank) with
/// the id rank 0 makes and sends over `bootstrap`. The group keeps `bootstrap` for its control
/// collectives and its abort(). Throws, on every rank together, RankFailure when a rank's
/// device is not a present GPU and CollectiveError when two ranks of a host were given the same
/// GPU; Error when the build has no CUDA or NCCL fails (naming the rank, the GPU and NCCL's
/// message).
std::shared_ptr<ProcessGroup> nccl_process_group(std::shared_ptr<ProcessGroup> bootstrap,
                                                 Device device, ProcessGroupOptions options = {});

/// What makes NCCL groups, nccl_process_group's signature.
using NcclGroupMaker = std::shared_ptr<ProcessGroup> (*)(std::shared_ptr<ProcessGroup>, Device,
                                                         ProcessGroupOptions);
/// Called by the CUDA plugin as it loads (at static initialisation): the maker
/// nccl_process_group calls. Returns true to initialise a static.
bool supply_nccl_process_groups(NcclGroupMaker make);

}  // namespace dprun
