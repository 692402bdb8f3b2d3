#include "engine/backends/cuda/nccl_clique.h"

#include <map>
#include <mutex>

#include "engine/backends/cuda/cuda_check.h"
#include "engine/backends/cuda/cuda_devices.h"
#include "engine/backends/cuda/cuda_stream.h"

namespace dprun {

namespace {

std::string gpu(int device) {
  return "cuda:" + std::to_string(device);
}

// Ends an NCCL group on every path: end() reports ncclGroupEnd's error; the destructor (after
// an exception) ends the group quietly.
class NcclGroup {
 public:
  explicit NcclGroup(const std::string& context) : context_(context) {
    nccl_check(ncclGroupStart(), context_, ": ncclGroupStart");
  }
  ~NcclGroup() {
    if (open_) ncclGroupEnd();
  }
  void end() {
    open_ = false;
    nccl_check(ncclGroupEnd(), context_, ": ncclGroupEnd");
  }

 private:
  const std::string& context_;
  bool open_ = true;
};

struct CliqueCache {
  std::mutex mutex;
  std::map<std::vector<int>, std::shared_ptr<NcclClique>> cliques;
};

// Never destroyed (see nccl_clique in the header).
CliqueCache& cache() {
  static CliqueCache* c = new CliqueCache();
  return *c;
}

}  // namespace

NcclClique::NcclClique(std::vector<int> devices) : devices_(std::move(devices)) {
  for (int d : devices_) {
    if (!name_.empty()) name_ += ',';
    name_ += gpu(d);
  }
  DPRUN_CHECK(devices_.size() >= 2, "NCCL clique over ", name_, ": needs two GPUs or more");
  const int n = size();
  comms_.assign(devices_.size(), nullptr);
  nccl_check(ncclCommInitAll(comms_.data(), n, devices_.data()), "NCCL clique over ", name_,
             ": ncclCommInitAll");
  try {
    for (int r = 0; r < n; ++r) {
      CudaDeviceGuard guard(device(r));
      cudaStream_t stream = nullptr;
      cuda_check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), gpu(device(r)),
                 ": cudaStreamCreateWithFlags for NCCL");
      streams_.push_back(stream);
      cudaEvent_t event = nullptr;
      cuda_check(cudaEventCreateWithFlags(&event, cudaEventDisableTiming), gpu(device(r)),
                 ": cudaEventCreateWithFlags for NCCL");
      events_.push_back(event);
    }
  } catch (...) {
    release();
    throw;
  }
}

NcclClique::~NcclClique() {
  release();
}

void NcclClique::release() noexcept {
  // No guards here: they throw, and this cannot. Errors are dropped at the end.
  int previous = -1;
  cudaGetDevice(&previous);
  for (size_t r = 0; r < streams_.size(); ++r) {
    cudaSetDevice(devices_[r]);
    cudaStreamSynchronize(streams_[r]);
  }
  // One thread finalizes every rank, so the calls go in one group (each would otherwise wait
  // for the others); destroying then frees each rank's resources without waiting.
  if (!comms_.empty() && ncclGroupStart() == ncclSuccess) {
    for (ncclComm_t comm : comms_)
      if (comm != nullptr) ncclCommFinalize(comm);
    ncclGroupEnd();
  }
  for (ncclComm_t comm : comms_)
    if (comm != nullptr) ncclCommDestroy(comm);
  comms_.clear();
  for (size_t r = 0; r < streams_.size(); ++r) {
    cudaSetDevice(devices_[r]);
    cudaStreamDestroy(streams_[r]);
    if (r < events_.size()) cudaEventDestroy(events_[r]);
  }
  streams_.clear();
  events_.clear();
  if (previous >= 0) cudaSetDevice(previous);
  cudaGetLastError();
}

void NcclClique::run(const std::string& what, const std::function<void(int rank)>& enqueue) {
  static std::mutex one_collective_at_a_time;
  std::lock_guard lock(one_collective_at_a_time);
  const std::string context = what + " over " + name_;
  for (int r = 0; r < size(); ++r) {
    CudaDeviceGuard guard(device(r));
    cuda_check(cudaEventRecord(events_[r], current_stream(device(r))), context, ": ",
               gpu(device(r)), ": cudaEventRecord");
    cuda_check(cudaStreamWaitEvent(streams_[r], events_[r], 0), context, ": ", gpu(device(r)),
               ": cudaStreamWaitEvent");
  }
  NcclGroup group(context);
  for (int r = 0; r < size(); ++r) {
    CudaDeviceGuard guard(device(r));
    enqueue(r);
  }
  group.end();
  // Each current stream waits for its rank's part, as PyTorch's collectives order the caller's
  // stream after NCCL's. Only the legacy default stream (no context current) has the host wait,
  // as the backend's copies there do.
  for (int r = 0; r < size(); ++r) {
    CudaDeviceGuard guard(device(r));
    const cudaStream_t current = current_stream(device(r));
    if (current == nullptr) {
      cuda_check(cudaStreamSynchronize(streams_[r]), context, ": ", gpu(device(r)),
                 ": cudaStreamSynchronize");
      continue;
    }
    cuda_check(cudaEventRecord(events_[r], streams_[r]), context, ": ", gpu(device(r)),
               ": cudaEventRecord");
    cuda_check(cudaStreamWaitEvent(current, events_[r], 0), context, ": ", gpu(device(r)),
               ": cudaStreamWaitEvent");
  }
}

std::shared_ptr<NcclClique> nccl_clique(const std::vector<int>& devices) {
  CliqueCache& c = cache();
  std::lock_guard lock(c.mutex);
  auto& slot = c.cliques[devices];
  if (!slot) {
    try {
      slot = std::make_shared<NcclClique>(devices);
    } catch (...) {
      c.cliques.erase(devices);
      throw;
    }
  }
  return slot;
}

void release_nccl_cliques() {
  CliqueCache& c = cache();
  std::map<std::vector<int>, std::shared_ptr<NcclClique>> released;
  {
    std::lock_guard lock(c.mutex);
    released.swap(c.cliques);
  }
}

size_t nccl_clique_count() {
  CliqueCache& c = cache();
  std::lock_guard lock(c.mutex);
  return c.cliques.size();
}

}  // namespace dprun
