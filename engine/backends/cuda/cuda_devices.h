#pragma once
// The CUDA GPUs this process can see, and the calling thread's current GPU.
namespace dprun {

/// Number of CUDA GPUs visible to this process; 0 when there is no driver or no GPU. Asked of
/// the runtime once; never throws and never aborts.
int cuda_device_count();

/// Makes GPU `index` the calling thread's current device for the guard's lifetime and restores
/// the previous one after. Throws Error when the device cannot be made current.
class CudaDeviceGuard {
 public:
  explicit CudaDeviceGuard(int index);
  ~CudaDeviceGuard();
  CudaDeviceGuard(const CudaDeviceGuard&) = delete;
  CudaDeviceGuard& operator=(const CudaDeviceGuard&) = delete;

 private:
  int previous_ = -1;  // -1: already current, nothing to restore
};

}  // namespace dprun
