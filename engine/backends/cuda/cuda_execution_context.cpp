#include "engine/backends/cuda/cuda_execution_context.h"

#include "engine/backends/cuda/cuda_check.h"

namespace dprun {

CudaExecutionContext::CudaExecutionContext(Device device, CudaStreamPool& pool)
    : device_(device), pool_(pool), resources_(pool.acquire(device.index)) {
  try {
    device_guard_.emplace(device.index);
  } catch (...) {
    pool_.release(resources_);
    throw;
  }
  stream_scope_.emplace(device.index, resources_->stream());
}

CudaExecutionContext::~CudaExecutionContext() {
  stream_scope_.reset();
  device_guard_.reset();
  pool_.release(resources_);
}

CudaExecutionContext& CudaExecutionContext::of(ExecutionContext& execution) {
  auto* cuda = dynamic_cast<CudaExecutionContext*>(&execution);
  if (cuda == nullptr)
    fail("a CUDA kernel cannot run on ", execution.device().to_string(),
         ": its execution context is not a CUDA stream");
  return *cuda;
}

void CudaExecutionContext::synchronize() {
  cuda_check(cudaStreamSynchronize(stream()), device_.to_string(), ": cudaStreamSynchronize");
}

}  // namespace dprun
