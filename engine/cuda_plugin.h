#pragma once
// Where the CUDA backend lives. A build with CUDA puts the backend and the CUDA compute of the
// kernels (everything that calls the CUDA runtime, cuBLAS, cuDNN or NCCL) in a plugin,
// libdprun_cuda.so, beside libdprun; libdprun itself links none of CUDA's libraries, so a
// process that runs on CPU devices maps none of them. The plugin is opened (dlopen) the first
// time a cuda:N device is asked for (backend_for), or when `all` devices are listed and the
// driver reports a GPU (backend_available, which asks libcuda alone: driver_gpu_count). Its
// static registrars then add the CUDA backend, the computes of the CUDA kernel definitions
// (ops/cuda/defs/cuda_compute.h) and NCCL process groups to libdprun's registries. The kernel
// definitions themselves stay in libdprun, so every build plans for cuda:N alike.
//
// $DPRUN_CUDA_PLUGIN names another file to open instead of the one beside libdprun.
#include <string>

namespace dprun {

/// Whether this build of dprun has a CUDA plugin (it was built with the CUDA toolkit).
bool cuda_plugin_built();

/// The outcome of opening the plugin: where it was looked for, and dlopen's message when it
/// could not be opened (a missing file, or a missing library it needs, named by the dynamic
/// loader: "libcudnn.so.9: cannot open shared object file: No such file or directory").
struct CudaPluginLoad {
  bool loaded = false;
  std::string path;
  std::string error;  // empty when loaded
};

/// Opens the plugin once (thread-safe); every later call returns the first call's outcome.
/// Without a plugin in this build: not loaded, error "this build of dprun has no CUDA support".
const CudaPluginLoad& load_cuda_plugin();

/// The GPUs the CUDA driver reports (cuInit, cuDeviceGetCount from libcuda.so.1, opened with
/// dlopen; it honours CUDA_VISIBLE_DEVICES), counted once: 0 when the driver is not installed
/// or fails. Loads no CUDA library but the driver's.
int driver_gpu_count();

}  // namespace dprun
