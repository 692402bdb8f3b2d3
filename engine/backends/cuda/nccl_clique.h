#pragma once
// NCCL communicator cliques: one communicator per GPU of an ordered device list, made together by
// ncclCommInitAll in this process, with a stream per GPU that the clique's collectives run on.
// Making communicators costs far more than a collective, so cliques are cached per ordered list.
#include <cuda_runtime_api.h>
#include <nccl.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace dprun {

/// The communicators of one ordered GPU list: rank r is devices[r]. Thread-safe: run() holds one
/// process-wide lock, so one collective at a time runs in the process. NCCL requires that of a
/// communicator, and collectives of two cliques sharing a GPU, issued at once from two threads,
/// can each wait on the other's kernels (NCCL's "using multiple communicators concurrently").
class NcclClique {
 public:
  /// ncclCommInitAll over `devices` (distinct, at least two), then a non-blocking stream and
  /// an event per GPU. Throws Error naming the devices when NCCL or CUDA cannot.
  explicit NcclClique(std::vector<int> devices);
  /// Waits for the streams, finalizes the communicators in one group and destroys them, then
  /// the streams and events. Errors are ignored: a destructor cannot report them.
  ~NcclClique();
  NcclClique(const NcclClique&) = delete;
  NcclClique& operator=(const NcclClique&) = delete;

  int size() const { return static_cast<int>(devices_.size()); }
  int device(int rank) const { return devices_[static_cast<size_t>(rank)]; }
  ncclComm_t comm(int rank) const { return comms_[static_cast<size_t>(rank)]; }
  cudaStream_t stream(int rank) const { return streams_[static_cast<size_t>(rank)]; }
  /// "cuda:0,cuda:1".
  const std::string& name() const { return name_; }

  /// One coalesced collective: makes each rank's stream wait for the work queued on the calling
  /// thread's current stream of its GPU, calls enqueue(rank) for every rank between
  /// ncclGroupStart and ncclGroupEnd with that rank's GPU current (enqueue issues the rank's
  /// NCCL calls on stream(rank)), then makes each current stream wait for its rank's stream by
  /// an event; the host waits only where the current stream is the legacy default stream (no
  /// context). `what` names the operation in errors. Callers validate their arguments before: an
  /// enqueue that throws leaves the group ended with only the calls made so far, which may not
  /// complete.
  void run(const std::string& what, const std::function<void(int rank)>& enqueue);

 private:
  /// The destructor's work; also undoes a constructor that fails half-way.
  void release() noexcept;

  std::vector<int> devices_;
  std::string name_;
  std::vector<ncclComm_t> comms_;
  std::vector<cudaStream_t> streams_;
  std::vector<cudaEvent_t> events_;
};

/// The clique of `devices` in that order, made on first use and kept until
/// release_nccl_cliques(). Cliques are not destroyed at process exit: tearing NCCL down while
/// the CUDA runtime unloads is undefined (PyTorch skips ncclCommDestroy there for that reason),
/// so the process's exit reclaims them.
std::shared_ptr<NcclClique> nccl_clique(const std::vector<int>& devices);
/// Destroys the cached cliques (each when its last user lets go of it), cleanly, while CUDA is
/// up; the next collective makes its clique again.
void release_nccl_cliques();
/// Cliques in the cache (for tests).
size_t nccl_clique_count();

}  // namespace dprun
