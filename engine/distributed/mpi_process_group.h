#pragma once
// The process group of an MPI job: one rank per process, started by mpirun.
//
//   auto group = mpi_world_process_group();   // joins the job (MPI_Init_thread) on first use
//   all_reduce_sum_now(*group, gradient);
//
// All-reduces run on communicators of their own (MPI_Comm_dup of MPI_COMM_WORLD), apart from
// the control collectives, as the channels of ProcessGroup require. Waits test for completion
// (MPI_Test) rather than block inside MPI, so that they can end with a timeout: back to back,
// yielding the core between tests, and once a wait has lasted 10 s (a rank is behind, no data
// is moving), every millisecond.
// Timeouts name the late ranks. A wait that has lasted 50 ms answers, on a communicator of its
// own, any rank that asks how many collectives of each channel this rank has started. A wait
// that times out asks every other rank, waits up to 2 s for the answers, and throws naming the
// ranks that did not answer (stopped, stuck, or busy past the timeout), or when all answered,
// those that have not started the collective: "rank 1 did not join the all-reduce of step 3
// within 5 s" (the stage from set_stage). Time a rank spends stopped (SIGSTOP) is not counted
// as waiting (engine/distributed/wait_clock.h), so a resumed rank does not blame the others.
// The start is bounded too: MPI_Init_thread waits inside Open MPI for every rank to join, so
// while the group is being made a thread ends the process after the timeout, saying the job
// did not start (Open MPI does not say which rank is missing at that point).
// ReduceOrder::RankOrder is a reduce-scatter then an all-gather: rank j receives slice j of
// every rank's tensor (MPI_Ialltoallv), sums the slices in rank order, and the sums are
// gathered back into every rank's tensor (MPI_Iallgatherv). It moves as many bytes per rank as
// a ring all-reduce, 2 (n-1)/n of the tensor, and its result does not depend on the library.
#include <memory>

#include "engine/distributed/process_group.h"

namespace dprun {

/// True when this build of dprun has MPI support.
bool mpi_supported();

/// A group of every process of the MPI job (MPI_COMM_WORLD). Initializes MPI on first use
/// (MPI_THREAD_SERIALIZED at least) and finalizes it when the process exits. A process started
/// without mpirun is a job of one rank. When joining (MPI_Init_thread and the communicators'
/// MPI_Comm_dup) lasts longer than options.timeout_seconds, prints "dprun: error: rank R: the
/// job did not start within T s: ..." and ends the process with status 1. Throws Error "this build
/// of dprun has no MPI support" when built without MPI.
std::shared_ptr<ProcessGroup> mpi_world_process_group(ProcessGroupOptions options = {});

}  // namespace dprun
