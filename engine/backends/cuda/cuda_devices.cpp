#include "engine/backends/cuda/cuda_devices.h"

#include <cuda_runtime_api.h>

#include "engine/backends/cuda/cuda_check.h"

namespace dprun {

int cuda_device_count() {
  static const int count = [] {
    int n = 0;
    // No driver (cudaErrorInsufficientDriver) or no device (cudaErrorNoDevice): no GPUs.
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
      cudaGetLastError();
      n = 0;
    }
    return n;
  }();
  return count;
}

CudaDeviceGuard::CudaDeviceGuard(int index) {
  int current = -1;
  cuda_check(cudaGetDevice(&current), "cudaGetDevice");
  if (current == index) return;
  cuda_check(cudaSetDevice(index), "cudaSetDevice(", index, ")");
  previous_ = current;
}

CudaDeviceGuard::~CudaDeviceGuard() {
  if (previous_ >= 0) cudaSetDevice(previous_);  // restoring cannot fail once it was current
}

}  // namespace dprun
