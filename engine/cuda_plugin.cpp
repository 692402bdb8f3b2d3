#include "engine/cuda_plugin.h"

#include <dlfcn.h>

#include <cstdlib>
#include <filesystem>

namespace dprun {

#ifdef DPRUN_CUDA_PLUGIN_FILE
namespace {

// The plugin's file: $DPRUN_CUDA_PLUGIN, else the build's plugin name in the folder libdprun
// was loaded from (build/, an install's lib/, a bundle's lib/).
std::string plugin_path(const char* file_name) {
  if (const char* chosen = std::getenv("DPRUN_CUDA_PLUGIN"); chosen != nullptr && *chosen)
    return chosen;
  Dl_info self{};
  if (dladdr(reinterpret_cast<void*>(&load_cuda_plugin), &self) != 0 && self.dli_fname != nullptr)
    return (std::filesystem::path(self.dli_fname).parent_path() / file_name).string();
  return file_name;  // the dynamic loader's search path
}

}  // namespace
#endif

bool cuda_plugin_built() {
#ifdef DPRUN_CUDA_PLUGIN_FILE
  return true;
#else
  return false;
#endif
}

const CudaPluginLoad& load_cuda_plugin() {
  static const CudaPluginLoad outcome = [] {
    CudaPluginLoad load;
#ifdef DPRUN_CUDA_PLUGIN_FILE
    load.path = plugin_path(DPRUN_CUDA_PLUGIN_FILE);
    // Kept open for the process's life: its registrars have put its code in libdprun's tables.
    if (dlopen(load.path.c_str(), RTLD_NOW | RTLD_LOCAL) != nullptr) {
      load.loaded = true;
    } else {
      const char* why = dlerror();
      load.error = "the CUDA backend " + load.path +
                   " cannot be loaded: " + (why != nullptr ? why : "dlopen failed");
    }
#else
    load.error = "this build of dprun has no CUDA support";
#endif
    return load;
  }();
  return outcome;
}

int driver_gpu_count() {
  static const int count = [] {
    void* driver = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (driver == nullptr) return 0;
    using Init = int (*)(unsigned);
    using Count = int (*)(int*);
    auto init = reinterpret_cast<Init>(dlsym(driver, "cuInit"));
    auto device_count = reinterpret_cast<Count>(dlsym(driver, "cuDeviceGetCount"));
    int n = 0;
    // CUDA_SUCCESS is 0; any failure (no device, a driver older than the toolkit) counts none.
    if (init == nullptr || device_count == nullptr || init(0) != 0 || device_count(&n) != 0)
      return 0;
    return n;
  }();
  return count;
}

}  // namespace dprun
