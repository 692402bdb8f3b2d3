// nccl_process_group.h on the CUDA backend.
#include "engine/distributed/nccl_process_group.h"

#include <nccl.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "engine/backend.h"
#include "engine/backends/cuda/cuda_check.h"
#include "engine/backends/cuda/cuda_devices.h"
#include "engine/backends/cuda/cuda_stream.h"
#include "engine/backends/cuda/nccl_collectives.h"
#include "engine/backends/cuda/rank_order_sum.h"
#include "engine/distributed/local_ranks.h"
#include "engine/distributed/rank_failure.h"

namespace dprun {

namespace {

using Clock = std::chrono::steady_clock;

class NcclGroup;

// A collective in flight: done when `done_` (recorded after it on the group's stream) is.
class NcclWork : public CollectiveWork {
 public:
  NcclWork(NcclGroup& group, const char* what, cudaEvent_t done, Tensor tensor, Tensor scratch)
      : group_(group),
        what_(what),
        done_(done),
        tensor_(std::move(tensor)),
        scratch_(std::move(scratch)) {}
  ~NcclWork() override;
  bool test() override;
  void wait() override;

 private:
  NcclGroup& group_;
  const char* what_;  // "all_reduce_sum" or "broadcast", for errors
  cudaEvent_t done_;
  Tensor tensor_;   // kept alive until the work is done
  Tensor scratch_;  // RankOrder's gathered parts
  bool finished_ = false;
};

class NcclGroup : public ProcessGroup {
 public:
  NcclGroup(std::shared_ptr<ProcessGroup> bootstrap, Device device, ProcessGroupOptions options)
      : bootstrap_(std::move(bootstrap)), device_(device), options_(options) {
    DPRUN_CHECK(bootstrap_ != nullptr, "NCCL process group: no group to start from");
    check_gpus();
    context_ = detail::concat("NCCL rank ", rank(), " of ", size(), " on ", device.to_string());
    // Rank 0 makes the communicator's id; every rank takes rank 0's from an all-gather.
    ncclUniqueId id;
    std::memset(&id, 0, sizeof id);
    if (rank() == 0) nccl_check(ncclGetUniqueId(&id), context_, ": ncclGetUniqueId");
    auto ids = bootstrap_->all_gather(
        std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(&id), sizeof id));
    std::memcpy(&id, ids.data(), sizeof id);
    CudaDeviceGuard guard(device_.index);
    nccl_check(ncclCommInitRank(&comm_, size(), id, rank()), context_, ": ncclCommInitRank");
    try {
      cuda_check(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), context_,
                 ": cudaStreamCreateWithFlags");
      cuda_check(cudaEventCreateWithFlags(&ready_, cudaEventDisableTiming), context_,
                 ": cudaEventCreateWithFlags");
    } catch (...) {
      release();
      throw;
    }
  }
  ~NcclGroup() override { release(); }

  int rank() const override { return bootstrap_->rank(); }
  int size() const override { return bootstrap_->size(); }
  std::string backend() const override { return "nccl"; }
  Device reduce_device() const override { return device_; }
  const std::string& context() const { return context_; }
  double timeout_seconds() const { return options_.timeout_seconds; }

  std::unique_ptr<CollectiveWork> all_reduce_sum(Tensor tensor, ReduceOrder order) override {
    DPRUN_CHECK(!aborted_, context_, ": all_reduce_sum after the communicator was aborted");
    check_all_reducible(tensor);
    DPRUN_CHECK(tensor.device() == device_, "all_reduce_sum on ", context_,
                ": the tensor must be in ", device_.to_string(), "'s memory, not ",
                tensor.describe());
    CudaDeviceGuard guard(device_.index);
    const auto count = static_cast<size_t>(tensor.numel());
    const ncclDataType_t type = nccl_sum_type(tensor.dtype());
    Tensor scratch;
    if (order == ReduceOrder::RankOrder && size() > 1)  // allocated on the caller's stream
      scratch = Tensor::empty({static_cast<int64_t>(count) * size()}, tensor.dtype(), device_);
    follow_callers_stream();
    if (order == ReduceOrder::Any) {
      nccl_check(
          ncclAllReduce(tensor.raw_data(), tensor.raw_data(), count, type, ncclSum, comm_, stream_),
          context_, ": ncclAllReduce of ", tensor.describe());
    } else if (scratch.defined()) {
      nccl_check(ncclAllGather(tensor.raw_data(), scratch.raw_data(), count, type, comm_, stream_),
                 context_, ": ncclAllGather of ", tensor.describe());
      sum_parts_in_rank_order(tensor.raw_data(), scratch.raw_data(), tensor.numel(), size(),
                              tensor.dtype(), stream_);
    }
    return work_queued("all_reduce_sum", std::move(tensor), std::move(scratch));
  }

  void broadcast(Tensor tensor, int root) override {
    broadcast_coalesced({std::move(tensor)}, root);
  }

  // The GPU tensors in one NCCL group of calls and one wait, then the host ones through the
  // bootstrap group.
  void broadcast_coalesced(const std::vector<Tensor>& tensors, int root) override {
    DPRUN_CHECK(root >= 0 && root < size(), "broadcast: root ", root,
                " is not a rank of a group of ", size());
    std::vector<Tensor> on_gpu;
    for (const Tensor& t : tensors) {
      if (t.device().type == DeviceType::CPU) continue;
      DPRUN_CHECK(t.device() == device_ && t.dtype() != DType::String, "broadcast on ", context_,
                  ": the tensor must be in host memory or ", device_.to_string(), "'s, not ",
                  t.describe());
      on_gpu.push_back(t);
    }
    if (!on_gpu.empty()) {
      DPRUN_CHECK(!aborted_, context_, ": broadcast after the communicator was aborted");
      CudaDeviceGuard guard(device_.index);
      follow_callers_stream();
      nccl_check(ncclGroupStart(), context_, ": ncclGroupStart");
      for (Tensor& t : on_gpu) {
        const ncclResult_t queued =
            ncclBroadcast(t.raw_data(), t.raw_data(), t.nbytes(), ncclUint8, root, comm_, stream_);
        if (queued != ncclSuccess) ncclGroupEnd();
        nccl_check(queued, context_, ": ncclBroadcast of ", t.describe());
      }
      nccl_check(ncclGroupEnd(), context_, ": ncclGroupEnd");
      work_queued("broadcast", {}, {})->wait();
    }
    for (const Tensor& t : tensors)
      if (t.device().type == DeviceType::CPU) bootstrap_->broadcast(t, root);
  }
  std::vector<uint8_t> all_gather(std::span<const uint8_t> bytes) override {
    return bootstrap_->all_gather(bytes);
  }
  std::vector<std::vector<uint8_t>> gather(std::span<const uint8_t> bytes, int root) override {
    return bootstrap_->gather(bytes, root);
  }
  void barrier() override { bootstrap_->barrier(); }
  [[noreturn]] void abort(int exit_code) override {
    bootstrap_->abort(exit_code);
    std::abort();  // not reached: the bootstrap group's abort() ends the process
  }

  /// Throws when NCCL reports an asynchronous error (aborting the communicator first) or the
  /// communicator was aborted.
  void check_async_error(const char* what) {
    DPRUN_CHECK(!aborted_, context_, ": ", what, ": the communicator was aborted");
    ncclResult_t async = ncclSuccess;
    nccl_check(ncclCommGetAsyncError(comm_, &async), context_, ": ncclCommGetAsyncError");
    if (async == ncclSuccess || async == ncclInProgress) return;
    abort_communicator();
    fail(context_, ": ", what, " failed: ", ncclGetErrorString(async), " (NCCL result ",
         static_cast<int>(async), ")");
  }
  /// Ends the communicator's work, queued or running (a peer is gone or late).
  void abort_communicator() {
    if (aborted_) return;
    aborted_ = true;
    ncclCommAbort(comm_);
    comm_ = nullptr;
  }

 private:
  // Collective: no two ranks of a host were given the same GPU (NCCL's rule), and every rank's
  // device is a present GPU; otherwise every rank throws the same error, naming the ranks, and
  // none is left waiting for the others in ncclCommInitRank.
  void check_gpus() {
    struct RankGpu {
      uint64_t host;
      int32_t type;
      int32_t index;
    };
    const auto all = all_gather_values(
        *bootstrap_, RankGpu{host_id(), static_cast<int32_t>(device_.type), device_.index});
    const auto cuda = static_cast<int32_t>(DeviceType::CUDA);
    for (size_t a = 0; a < all.size(); ++a)
      for (size_t b = a + 1; b < all.size(); ++b)
        if (all[a].type == cuda && all[b].type == cuda && all[a].host == all[b].host &&
            all[a].index == all[b].index)
          throw CollectiveError(
              detail::concat("NCCL process group: ranks ", a, " and ", b,
                             " run on one host and were both given cuda:", all[a].index,
                             "; NCCL needs a GPU of its own for each rank"));
    std::exception_ptr error;
    try {
      DPRUN_CHECK(device_.type == DeviceType::CUDA, "NCCL process group: ", device_.to_string(),
                  " is not a GPU; NCCL sums in the memory of a GPU (cuda:N)");
      backend_for(DeviceType::CUDA).check_device(device_);
    } catch (...) {
      error = std::current_exception();
    }
    throw_if_any_rank_failed(*bootstrap_, error);
  }

  // Makes the group's stream wait for the work queued so far on the calling thread's current
  // stream of the GPU (which writes what the collective reads).
  void follow_callers_stream() {
    cuda_check(cudaEventRecord(ready_, current_stream(device_.index)), context_,
               ": cudaEventRecord");
    cuda_check(cudaStreamWaitEvent(stream_, ready_, 0), context_, ": cudaStreamWaitEvent");
  }

  // The work queued on the group's stream so far, done when an event recorded now is.
  std::unique_ptr<CollectiveWork> work_queued(const char* what, Tensor tensor, Tensor scratch) {
    cudaEvent_t done = nullptr;
    cuda_check(cudaEventCreateWithFlags(&done, cudaEventDisableTiming), context_,
               ": cudaEventCreateWithFlags");
    auto work =
        std::make_unique<NcclWork>(*this, what, done, std::move(tensor), std::move(scratch));
    cuda_check(cudaEventRecord(done, stream_), context_, ": cudaEventRecord");
    return work;
  }

  void release() noexcept {
    int previous = -1;
    cudaGetDevice(&previous);
    cudaSetDevice(device_.index);
    if (stream_ != nullptr) cudaStreamSynchronize(stream_);
    if (comm_ != nullptr && ncclCommFinalize(comm_) == ncclSuccess) ncclCommDestroy(comm_);
    comm_ = nullptr;
    if (ready_ != nullptr) cudaEventDestroy(ready_);
    if (stream_ != nullptr) cudaStreamDestroy(stream_);
    ready_ = nullptr;
    stream_ = nullptr;
    if (previous >= 0) cudaSetDevice(previous);
    cudaGetLastError();
  }

  std::shared_ptr<ProcessGroup> bootstrap_;
  Device device_;
  ProcessGroupOptions options_;
  std::string context_;
  ncclComm_t comm_ = nullptr;
  cudaStream_t stream_ = nullptr;
  cudaEvent_t ready_ = nullptr;  // the caller's stream, reached before a collective
  bool aborted_ = false;
};

NcclWork::~NcclWork() {
  // Scratch memory goes back to the caching allocator on the caller's stream: it must not be
  // reused before the gather that writes it is done.
  if (!finished_ && done_ != nullptr) cudaEventSynchronize(done_);
  if (done_ != nullptr) cudaEventDestroy(done_);
}

bool NcclWork::test() {
  if (finished_) return true;
  cudaError_t status = cudaEventQuery(done_);
  if (status == cudaSuccess) return finished_ = true;
  if (status != cudaErrorNotReady) cuda_check(status, group_.context(), ": ", what_);
  cudaGetLastError();  // cudaErrorNotReady is not an error to keep
  group_.check_async_error(what_);
  return false;
}

void NcclWork::wait() {
  // Polls rather than cudaEventSynchronize, so that the wait can end: back to back, yielding the
  // core, and once it has lasted 10 s (a rank is behind, nothing is moving) every millisecond.
  const auto start = Clock::now();
  const auto deadline = start + std::chrono::duration<double>(group_.timeout_seconds());
  while (!test()) {
    const auto now = Clock::now();
    if (now > deadline) {
      group_.abort_communicator();
      fail(group_.context(), ": ", what_, ": the other ranks did not join within ",
           group_.timeout_seconds(), " s");
    }
    if (now - start < std::chrono::seconds(10))
      std::this_thread::yield();
    else
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

std::shared_ptr<ProcessGroup> make_nccl_group(std::shared_ptr<ProcessGroup> bootstrap,
                                              Device device, ProcessGroupOptions options) {
  return std::make_shared<NcclGroup>(std::move(bootstrap), device, options);
}

[[maybe_unused]] const bool supplied = supply_nccl_process_groups(&make_nccl_group);

}  // namespace

}  // namespace dprun
