#pragma once
// The calling thread's current stream on each GPU. A CudaExecutionContext makes its stream
// current for its lifetime, so allocations (the allocator's per-stream pools) and copies made
// during a run go on the run's stream without being told. Without a context the current stream
// is the legacy default stream (0), and the backend's copies on it wait for their completion.
#include <cuda_runtime_api.h>

namespace dprun {

/// The calling thread's current stream on GPU `device`.
cudaStream_t current_stream(int device);

/// Makes `stream` the calling thread's current stream on GPU `device` for the scope's lifetime,
/// then restores the previous one. Scopes nest; destroy them in reverse order.
class CurrentStreamScope {
 public:
  CurrentStreamScope(int device, cudaStream_t stream);
  ~CurrentStreamScope();
  CurrentStreamScope(const CurrentStreamScope&) = delete;
  CurrentStreamScope& operator=(const CurrentStreamScope&) = delete;

 private:
  int device_;
  cudaStream_t previous_;
};

}  // namespace dprun
