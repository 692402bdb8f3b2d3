// The stream operations of the CUDA GPUs (engine/stream_order.h): an event is a cudaEvent_t
// recorded on the calling thread's current stream (cuda_stream.h), a wait is
// cudaStreamWaitEvent, and record_stream goes to the GPU's caching allocator.
#include <cuda_runtime_api.h>

#include "engine/backends/cuda/cuda_allocator.h"
#include "engine/backends/cuda/cuda_backend.h"
#include "engine/backends/cuda/cuda_check.h"
#include "engine/backends/cuda/cuda_devices.h"
#include "engine/backends/cuda/cuda_stream.h"
#include "engine/stream_order.h"

namespace dprun {

namespace {

class CudaEvent final : public StreamEvent {
 public:
  explicit CudaEvent(cudaEvent_t event) : event_(event) {}
  // Destroying an event whose work is pending is allowed: CUDA frees it once the work is done.
  ~CudaEvent() override { cudaEventDestroy(event_); }
  CudaEvent(const CudaEvent&) = delete;
  CudaEvent& operator=(const CudaEvent&) = delete;
  cudaEvent_t get() const { return event_; }

 private:
  cudaEvent_t event_;
};

bool capturing(cudaStream_t stream) {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  if (cudaStreamIsCapturing(stream, &status) == cudaSuccess)
    return status != cudaStreamCaptureStatusNone;
  cudaGetLastError();
  return false;
}

class CudaStreamOrder final : public StreamOrder {
 public:
  std::shared_ptr<const StreamEvent> record(Device device) override {
    const cudaStream_t stream = current_stream(device.index);
    // The legacy default stream: the backend waits for what it queues there.
    if (stream == nullptr) return nullptr;
    CudaDeviceGuard guard(device.index);
    cudaEvent_t event = nullptr;
    cuda_check(cudaEventCreateWithFlags(&event, cudaEventDisableTiming), device.to_string(),
               ": cudaEventCreateWithFlags");
    auto owned = std::make_shared<CudaEvent>(event);
    cuda_check(cudaEventRecord(event, stream), device.to_string(), ": cudaEventRecord");
    return owned;
  }
  void wait(Device device, const StreamEvent& event, StreamWait) override {
    CudaDeviceGuard guard(device.index);
    const cudaStream_t stream = current_stream(device.index);
    const cudaEvent_t recorded = static_cast<const CudaEvent&>(event).get();
    // A capture holds no wait for work outside it (a kept constant, made before the capture):
    // work done already needs none; other work breaks the capture.
    if (stream != nullptr && capturing(stream)) {
      if (cudaEventQuery(recorded) == cudaSuccess) return;
      cudaGetLastError();
      fail(device.to_string(), ": a CUDA graph capture waits for work queued outside it");
    }
    cuda_check(cudaStreamWaitEvent(stream, recorded, 0), device.to_string(),
               ": cudaStreamWaitEvent");
  }
  void record_stream(Device memory, const void* data, Device stream_device) override {
    if (stream_device.type != DeviceType::CUDA) return;
    auto allocator =
        std::static_pointer_cast<CudaCachingAllocator>(CudaBackend::instance().allocator(memory));
    allocator->record_stream(data, current_stream(stream_device.index));
  }
};

struct CudaStreamOrderRegistrar {
  CudaStreamOrderRegistrar() {
    static CudaStreamOrder* order = new CudaStreamOrder();  // never destroyed, as the backend
    register_stream_order(DeviceType::CUDA, order);
  }
} registrar;

}  // namespace

}  // namespace dprun
