// CUDA graphs (engine/stream_capture.h): cudaStreamBeginCapture in thread-local mode on the
// calling thread's current stream, allocations on it from a private pool of the GPU's caching
// allocator, cudaStreamEndCapture and cudaGraphInstantiate, and cudaGraphLaunch to replay on the
// run's stream. CUDA itself refuses what a capture cannot hold (a synchronisation of the
// capturing stream, a copy to the host): the failing call throws, and end() reports that the
// capture was invalidated.
#include "engine/backends/cuda/cuda_capture.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "engine/backends/cuda/cuda_allocator.h"
#include "engine/backends/cuda/cuda_backend.h"
#include "engine/backends/cuda/cuda_check.h"
#include "engine/backends/cuda/cuda_devices.h"
#include "engine/backends/cuda/cuda_stream.h"
#include "engine/stream_capture.h"
#include "engine/tensor.h"

namespace dprun {

namespace {

std::shared_ptr<CudaCachingAllocator> allocator_of(Device device) {
  return std::static_pointer_cast<CudaCachingAllocator>(CudaBackend::instance().allocator(device));
}

class CudaGraph final : public CapturedGraph {
 public:
  CudaGraph(Device device, cudaGraph_t graph, cudaGraphExec_t exec,
            std::shared_ptr<CudaCachingAllocator::PrivatePool> pool, std::vector<Tensor> kept)
      : device_(device),
        graph_(graph),
        exec_(exec),
        pool_(std::move(pool)),
        kept_(std::move(kept)) {}
  ~CudaGraph() override {
    cudaGraphExecDestroy(exec_);
    cudaGraphDestroy(graph_);
    allocator_of(device_)->release_pool(pool_);
  }
  CudaGraph(const CudaGraph&) = delete;
  CudaGraph& operator=(const CudaGraph&) = delete;

  void replay(const std::function<void()>&) override {
    CudaDeviceGuard guard(device_.index);
    cuda_check(cudaGraphLaunch(exec_, current_stream(device_.index)), device_.to_string(),
               ": cudaGraphLaunch");
  }
  bool ran_at_capture() const override { return false; }

 private:
  Device device_;
  cudaGraph_t graph_;
  cudaGraphExec_t exec_;
  std::shared_ptr<CudaCachingAllocator::PrivatePool> pool_;
  std::vector<Tensor> kept_;  // host memory the graph copies from at every replay
};

class CudaStreamCapture final : public StreamCapture {
 public:
  void begin(Device device) override {
    const cudaStream_t stream = current_stream(device.index);
    DPRUN_CHECK(stream != nullptr, device.to_string(),
                ": a CUDA graph is captured on an execution context's stream, not the default one");
    CudaDeviceGuard guard(device.index);
    auto pool = allocator_of(device)->begin_pool(stream);
    const cudaError_t status = cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal);
    if (status != cudaSuccess) allocator_of(device)->end_pool(stream);
    cuda_check(status, device.to_string(), ": cudaStreamBeginCapture");
    std::lock_guard lock(mutex_);
    captures_[{std::this_thread::get_id(), device.index}] = {std::move(pool), {}};
  }

  std::unique_ptr<CapturedGraph> end(Device device) override {
    auto [pool, kept] = take(device);
    const cudaStream_t stream = current_stream(device.index);
    CudaDeviceGuard guard(device.index);
    cudaGraph_t graph = nullptr;
    const cudaError_t ended = cudaStreamEndCapture(stream, &graph);
    allocator_of(device)->end_pool(stream);
    cudaGraphExec_t exec = nullptr;
    cudaError_t status = ended;
    if (status == cudaSuccess) status = cudaGraphInstantiate(&exec, graph, 0);
    if (status != cudaSuccess) {
      if (graph != nullptr) cudaGraphDestroy(graph);
      if (pool) allocator_of(device)->release_pool(pool);
      cuda_check(status, device.to_string(),
                 ended == cudaSuccess ? ": cudaGraphInstantiate"
                                      : ": the CUDA graph capture failed: cudaStreamEndCapture");
    }
    return std::make_unique<CudaGraph>(device, graph, exec, std::move(pool), std::move(kept));
  }

  void abort(Device device) noexcept override {
    auto pool = take(device).pool;
    const cudaStream_t stream = current_stream(device.index);
    cudaStreamCaptureStatus capturing = cudaStreamCaptureStatusNone;
    if (cudaStreamIsCapturing(stream, &capturing) == cudaSuccess &&
        capturing != cudaStreamCaptureStatusNone) {
      cudaGraph_t graph = nullptr;
      cudaStreamEndCapture(stream, &graph);  // ends an invalidated capture too
      if (graph != nullptr) cudaGraphDestroy(graph);
    }
    cudaGetLastError();
    try {
      auto allocator = allocator_of(device);
      allocator->end_pool(stream);
      if (pool) allocator->release_pool(pool);
    } catch (...) {  // NOLINT(bugprone-empty-catch): the device is gone; nothing to give back
    }
  }

  void keep(Device device, const Tensor& host) override {
    std::lock_guard lock(mutex_);
    auto it = captures_.find({std::this_thread::get_id(), device.index});
    if (it != captures_.end()) it->second.kept.push_back(host);
  }

  bool keeps(int device, const void* src) {
    std::lock_guard lock(mutex_);
    auto it = captures_.find({std::this_thread::get_id(), device});
    if (it == captures_.end()) return false;
    const auto* p = static_cast<const char*>(src);
    return std::any_of(it->second.kept.begin(), it->second.kept.end(), [&](const Tensor& t) {
      const auto* start = static_cast<const char*>(t.raw_data());
      return p >= start && p < start + t.nbytes();
    });
  }

  bool capturing(Device device) override {
    const cudaStream_t stream = current_stream(device.index);
    if (stream == nullptr) return false;
    cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
    if (cudaStreamIsCapturing(stream, &status) != cudaSuccess) {
      cudaGetLastError();
      return false;
    }
    return status != cudaStreamCaptureStatusNone;
  }

 private:
  struct Capture {
    std::shared_ptr<CudaCachingAllocator::PrivatePool> pool;
    std::vector<Tensor> kept;
  };
  Capture take(Device device) {
    std::lock_guard lock(mutex_);
    auto it = captures_.find({std::this_thread::get_id(), device.index});
    if (it == captures_.end()) return {};
    Capture capture = std::move(it->second);
    captures_.erase(it);
    return capture;
  }

  std::mutex mutex_;
  // Each capture's pool and kept host memory, by capturing thread and GPU.
  std::map<std::pair<std::thread::id, int>, Capture> captures_;
};

CudaStreamCapture& the_capture() {
  static CudaStreamCapture* capture = new CudaStreamCapture();  // never destroyed, as the backend
  return *capture;
}

struct CudaStreamCaptureRegistrar {
  CudaStreamCaptureRegistrar() { register_stream_capture(DeviceType::CUDA, &the_capture()); }
} registrar;

}  // namespace

bool cuda_capture_keeps(int device, const void* src) {
  return the_capture().keeps(device, src);
}

}  // namespace dprun
