#pragma once
// The execution resource of a CUDA GPU for one run: a stream, with the cuBLAS and cuDNN
// handles bound to it. A CUDA kernel (registered with .device = DeviceType::CUDA) reaches it
// through its KernelContext:
//
//   CudaExecutionContext& cuda = CudaExecutionContext::of(ctx.execution());
//   my_kernel<<<blocks, threads, 0, cuda.stream()>>>(...);
//   cublasSgemm(cuda.cublas(), ...);
//
// Kernels queue work on stream() and return without waiting; the executor (or whoever made
// the context) synchronizes it.
#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <cudnn.h>

#include <optional>

#include "engine/backends/cuda/cuda_devices.h"
#include "engine/backends/cuda/cuda_stream.h"
#include "engine/backends/cuda/cuda_stream_pool.h"
#include "engine/execution_context.h"

namespace dprun {

class CudaExecutionContext final : public ExecutionContext {
 public:
  /// Borrows stream resources of `device` from `pool` and, for the context's lifetime, makes
  /// the GPU the calling thread's current device and the stream its current stream there
  /// (current_stream), so the run's allocations and copies go on it. The device must be valid
  /// (CudaBackend::check_device).
  CudaExecutionContext(Device device, CudaStreamPool& pool);
  /// Restores the thread's previous device and stream and gives the resources back without
  /// waiting: work still queued stays ordered on the stream for its next user.
  ~CudaExecutionContext() override;

  /// The CUDA context behind a run's ExecutionContext; throws Error when it is not one (a
  /// kernel registered for CUDA run on another device).
  static CudaExecutionContext& of(ExecutionContext& execution);

  Device device() const override { return device_; }
  /// Host-side loops of CUDA kernels run on the calling thread.
  int threads() const override { return 1; }
  /// Blocks until the stream's queued work is done; throws Error naming the device when the
  /// work failed.
  void synchronize() override;

  cudaStream_t stream() const { return resources_->stream(); }
  /// The cuBLAS handle bound to stream() (default math mode: no TF32).
  cublasHandle_t cublas() { return resources_->cublas(); }
  /// The cuDNN handle bound to stream().
  cudnnHandle_t cudnn() { return resources_->cudnn(); }
  /// The stream's cuBLASLt handle; pass stream() to each call.
  cublasLtHandle_t cublas_lt() { return resources_->cublas_lt(); }

 private:
  Device device_;
  CudaStreamPool& pool_;
  CudaStreamResources* resources_;
  std::optional<CudaDeviceGuard> device_guard_;
  std::optional<CurrentStreamScope> stream_scope_;
};

}  // namespace dprun
