#include "engine/backends/cuda/cuda_libraries.h"

#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <cudnn.h>
#include <nccl.h>

#include <sstream>

namespace dprun {

namespace {
/// "13.0" from CUDA's 1000 * major + 10 * minor encoding.
std::string cuda_version(int v) {
  return std::to_string(v / 1000) + "." + std::to_string(v % 1000 / 10);
}
}  // namespace

std::string cuda_library_versions() {
  std::ostringstream out;
  int runtime = 0, driver = 0;
  cudaRuntimeGetVersion(&runtime);
  if (cudaDriverGetVersion(&driver) != cudaSuccess) driver = 0;
  cudaGetLastError();
  out << "CUDA runtime " << cuda_version(runtime) << ", driver "
      << (driver > 0 ? cuda_version(driver) : std::string("none"));
  int major = 0, minor = 0, patch = 0;
  cublasGetProperty(MAJOR_VERSION, &major);
  cublasGetProperty(MINOR_VERSION, &minor);
  cublasGetProperty(PATCH_LEVEL, &patch);
  out << ", cuBLAS " << major << "." << minor << "." << patch;
  size_t lt = cublasLtGetVersion();  // major * 10000 + minor * 100 + patch
  out << ", cuBLASLt " << lt / 10000 << "." << lt / 100 % 100 << "." << lt % 100;
  size_t dnn = cudnnGetVersion();  // major * 10000 + minor * 100 + patch (cuDNN 9)
  out << ", cuDNN " << dnn / 10000 << "." << dnn / 100 % 100 << "." << dnn % 100;
  int nccl = 0;
  ncclGetVersion(&nccl);  // major * 10000 + minor * 100 + patch
  out << ", NCCL " << nccl / 10000 << "." << nccl / 100 % 100 << "." << nccl % 100;
  return out.str();
}

}  // namespace dprun
