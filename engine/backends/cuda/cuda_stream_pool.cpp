#include "engine/backends/cuda/cuda_stream_pool.h"

#include <string>

#include "engine/backends/cuda/cuda_check.h"
#include "engine/backends/cuda/cuda_devices.h"

namespace dprun {

namespace {
std::string gpu(int device) {
  return "cuda:" + std::to_string(device);
}
}  // namespace

CudaStreamResources::CudaStreamResources(int device) : device_(device) {
  CudaDeviceGuard guard(device);
  cuda_check(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), gpu(device),
             ": cudaStreamCreateWithFlags");
}

cublasHandle_t CudaStreamResources::cublas() {
  if (cublas_ == nullptr) {
    CudaDeviceGuard guard(device_);
    cublasHandle_t handle = nullptr;
    cublas_check(cublasCreate(&handle), gpu(device_), ": cublasCreate");
    cublas_check(cublasSetStream(handle, stream_), gpu(device_), ": cublasSetStream");
    cublas_check(cublasSetMathMode(handle, CUBLAS_DEFAULT_MATH), gpu(device_),
                 ": cublasSetMathMode");
    cublas_ = handle;
  }
  return cublas_;
}

cublasLtHandle_t CudaStreamResources::cublas_lt() {
  if (cublas_lt_ == nullptr) {
    CudaDeviceGuard guard(device_);
    cublasLtHandle_t handle = nullptr;
    cublas_check(cublasLtCreate(&handle), gpu(device_), ": cublasLtCreate");
    cublas_lt_ = handle;
  }
  return cublas_lt_;
}

cudnnHandle_t CudaStreamResources::cudnn() {
  if (cudnn_ == nullptr) {
    CudaDeviceGuard guard(device_);
    cudnnHandle_t handle = nullptr;
    cudnn_check(cudnnCreate(&handle), gpu(device_), ": cudnnCreate");
    cudnn_check(cudnnSetStream(handle, stream_), gpu(device_), ": cudnnSetStream");
    cudnn_ = handle;
  }
  return cudnn_;
}

CudaStreamResources* CudaStreamPool::acquire(int device) {
  std::lock_guard lock(mutex_);
  if (pools_.size() <= static_cast<size_t>(device)) pools_.resize(static_cast<size_t>(device) + 1);
  DevicePool& pool = pools_[static_cast<size_t>(device)];
  if (!pool.free.empty()) {
    CudaStreamResources* r = pool.free.back();
    pool.free.pop_back();
    return r;
  }
  pool.all.push_back(std::make_unique<CudaStreamResources>(device));
  return pool.all.back().get();
}

void CudaStreamPool::release(CudaStreamResources* resources) {
  std::lock_guard lock(mutex_);
  pools_[static_cast<size_t>(resources->device())].free.push_back(resources);
}

}  // namespace dprun
