#pragma once
// ProcessGroup: collectives between the ranks of a distributed job, as torch.distributed's
// process groups. Implementations:
//   - MPI, one rank per process (engine/distributed/mpi_process_group.h), over host memory (for
//     devices that are not the host, DistributedDataParallel and the Reducer stage their
//     tensors through host copies);
//   - threads of one process (engine/distributed/thread_process_group.h), for tests and for running
//     the distributed code paths without a launcher; over host memory, or over each rank's
//     device memory as a stand-in for NCCL;
//   - NCCL, one GPU per rank (engine/distributed/nccl_process_group.h): all-reduces on the GPU's
//   memory,
//     queued on a stream of the group after the caller's work; the rest goes to the MPI group it
//     was made from.
//
// Matching rules. A collective is matched across ranks by call order within its channel:
// all_reduce_sum calls form one channel; broadcast, all_gather, gather and barrier form the
// other (the control channel). Every rank must issue the same sequence of calls in each
// channel, but a rank may issue control collectives while its all-reduces are still in flight,
// which is how a step's status is exchanged before its gradients are awaited.
//
// Threads. Calls on one group must not overlap in time, but may come from different threads
// one after another (a device worker starting all-reduces during a backward pass, then the
// caller's thread waiting for them).
#include <cstdint>
#include <cstring>
#include <memory>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include "engine/tensor.h"

namespace dprun {

/// How all_reduce_sum orders its additions.
enum class ReduceOrder {
  /// The implementation's algorithm (MPI_Iallreduce). The order of the additions depends on
  /// the number of ranks, the message size and the library, so the sums may differ in the
  /// last bits from the rank-order sum (never across ranks: every rank gets the same bits).
  Any,
  /// Every element is summed in rank order, ((x0 + x1) + x2) + ... + x(n-1), in the tensor's
  /// dtype, on every rank: the result is bit-identical from run to run and equals reduce_add
  /// (engine/parallel/comm.h) of the ranks' tensors listed in rank order.
  RankOrder,
};

/// A collective in flight (torch.distributed's Work).
class CollectiveWork {
 public:
  virtual ~CollectiveWork() = default;
  /// Advances the operation without blocking; true once it has completed.
  virtual bool test() = 0;
  /// Blocks until the operation completes. Throws Error when the group's timeout passes first;
  /// the group is unusable after that (abort() the job).
  virtual void wait() = 0;
};

struct ProcessGroupOptions {
  /// How long a blocking call waits for the other ranks before it throws: 30 minutes, as
  /// torch.distributed's default.
  double timeout_seconds = 1800;
};

class ProcessGroup {
 public:
  virtual ~ProcessGroup() = default;
  ProcessGroup() = default;
  ProcessGroup(const ProcessGroup&) = delete;
  ProcessGroup& operator=(const ProcessGroup&) = delete;

  /// This process's rank, 0 .. size()-1.
  virtual int rank() const = 0;
  virtual int size() const = 0;
  /// "mpi", "nccl" or "threads".
  virtual std::string backend() const = 0;
  /// Where all_reduce_sum's tensors live: host memory (cpu:0, the default), or this rank's
  /// device for a group that sums in device memory (NCCL's GPU). The Reducer keeps its buckets
  /// there.
  virtual Device reduce_device() const { return Device::cpu(); }

  /// Starts summing `tensor` over the ranks, in place: once the work completes, every rank's
  /// tensor holds the sum of all ranks' tensors. Every rank passes a tensor of a dtype
  /// can_all_reduce() takes, in reduce_device()'s memory, with the same dtype and element count.
  /// The tensor must stay untouched until the work completes. A device tensor is read after the
  /// work queued on the calling thread's current stream of the device (as NCCL's collectives on
  /// PyTorch's current stream): work on other streams that writes it must be waited for first.
  virtual std::unique_ptr<CollectiveWork> all_reduce_sum(Tensor tensor, ReduceOrder order) = 0;
  /// Copies `root`'s tensor into every other rank's (same dtype and shape everywhere; any dtype
  /// but string, in host memory or in reduce_device()'s memory) and returns when it is there.
  /// A device tensor is read after the work queued on the calling thread's current stream, as
  /// all_reduce_sum's; on a device group it goes the way of the all-reduces (NCCL's
  /// communicator), so every rank must issue its broadcasts of device tensors in the same order
  /// relative to its all-reduces (DistributedDataParallel does).
  virtual void broadcast(Tensor tensor, int root) = 0;
  /// broadcast of each of `tensors`, in order (the same list on every rank); a group may send
  /// them together (NCCL: one group of calls and one wait). This one calls broadcast for each.
  virtual void broadcast_coalesced(const std::vector<Tensor>& tensors, int root);
  /// Every rank's `bytes` (the same count on every rank), concatenated in rank order.
  virtual std::vector<uint8_t> all_gather(std::span<const uint8_t> bytes) = 0;
  /// Every rank's `bytes` (any count), in rank order, on `root`; other ranks get an empty list.
  virtual std::vector<std::vector<uint8_t>> gather(std::span<const uint8_t> bytes, int root) = 0;
  /// Returns once every rank has called it.
  virtual void barrier() = 0;
  /// Names the part of the job the next collectives belong to, for the message of a timeout:
  /// "of step 3" gives "rank 1 did not join the all-reduce of step 3 within 5 s"; "" names
  /// none. Local (nothing is exchanged). The MPI group uses it; others may ignore it.
  virtual void set_stage(const std::string& stage) { (void)stage; }
  /// Ends every rank of the job now with `exit_code` (MPI_Abort): for an error the other ranks
  /// cannot learn of, so that none of them waits for this one forever.
  [[noreturn]] virtual void abort(int exit_code) = 0;
};

/// Every rank's `value`, in rank order. T must be trivially copyable.
template <class T>
std::vector<T> all_gather_values(ProcessGroup& group, const T& value) {
  static_assert(std::is_trivially_copyable_v<T>);
  auto bytes = group.all_gather(
      std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(&value), sizeof(T)));
  std::vector<T> out(static_cast<size_t>(group.size()));
  std::memcpy(out.data(), bytes.data(), bytes.size());
  return out;
}

/// Every rank's string, in rank order.
std::vector<std::string> all_gather_strings(ProcessGroup& group, const std::string& text);

/// Sums `tensor` over the ranks in place and waits (all_reduce_sum, then wait()).
void all_reduce_sum_now(ProcessGroup& group, Tensor tensor,
                        ReduceOrder order = ReduceOrder::RankOrder);

/// Whether all_reduce_sum takes tensors of `dtype`: float32, float64, and float16 and bfloat16
/// (compressed gradients, each partial sum computed in float and rounded to 16 bits).
bool can_all_reduce(DType dtype);
/// Throws Error naming `tensor` when all_reduce_sum does not take its dtype.
void check_all_reducible(const Tensor& tensor);

/// Adds `part` into `sum` element by element (same dtype, one can_all_reduce takes, same
/// count): the step rank-order reductions repeat once per rank. A 16-bit sum is computed in
/// float and rounded once.
void add_in_place(void* sum, const void* part, int64_t count, DType dtype);

}  // namespace dprun
