#pragma once
// Streams of one GPU with the cuBLAS(Lt) and cuDNN handles bound to them, kept for reuse: creating
// a stream and its handles costs far more than a run, so execution contexts borrow them.
#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <cudnn.h>

#include <memory>
#include <mutex>
#include <vector>

namespace dprun {

/// One non-blocking stream of GPU `device`, and its library handles, created on first use and
/// bound to the stream. Used by one execution context at a time. Never destroyed: the pool
/// lives as long as the process, and the CUDA runtime may be gone when statics are destroyed.
class CudaStreamResources {
 public:
  /// Creates the stream on GPU `device`; throws Error when CUDA cannot.
  explicit CudaStreamResources(int device);
  CudaStreamResources(const CudaStreamResources&) = delete;
  CudaStreamResources& operator=(const CudaStreamResources&) = delete;

  int device() const { return device_; }
  cudaStream_t stream() const { return stream_; }
  /// The cuBLAS handle bound to stream(), in its default math mode (no TF32: float32 GEMMs
  /// match the CPU within float rounding). Created on first call, with the device current.
  cublasHandle_t cublas();
  /// The cuDNN handle bound to stream(). Created on first call, with the device current.
  cudnnHandle_t cudnn();
  /// A cuBLASLt handle (cuBLASLt takes the stream per call). Created on first call.
  cublasLtHandle_t cublas_lt();

 private:
  int device_;
  cudaStream_t stream_ = nullptr;
  cublasHandle_t cublas_ = nullptr;
  cudnnHandle_t cudnn_ = nullptr;
  cublasLtHandle_t cublas_lt_ = nullptr;
};

/// The stream resources of every GPU. Thread-safe.
class CudaStreamPool {
 public:
  /// Resources of GPU `device` that no one else holds, made when none is free. Give them back
  /// with release().
  CudaStreamResources* acquire(int device);
  void release(CudaStreamResources* resources);

 private:
  struct DevicePool {
    std::vector<std::unique_ptr<CudaStreamResources>> all;
    std::vector<CudaStreamResources*> free;
  };
  std::mutex mutex_;
  std::vector<DevicePool> pools_;
};

}  // namespace dprun
