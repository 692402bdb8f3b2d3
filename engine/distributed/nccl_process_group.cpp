// nccl_process_group.h's functions in libdprun: the groups themselves are made by the CUDA
// plugin (engine/backends/cuda/nccl_process_group.cpp), which supplies its maker when loaded.
#include "engine/distributed/nccl_process_group.h"

#include "engine/cuda_plugin.h"

namespace dprun {

namespace {

NcclGroupMaker& supplied_maker() {
  static NcclGroupMaker maker = nullptr;
  return maker;
}

// The plugin's maker, opening the plugin if this build has one; null otherwise.
NcclGroupMaker maker() {
  if (supplied_maker() == nullptr && cuda_plugin_built()) load_cuda_plugin();
  return supplied_maker();
}

}  // namespace

bool supply_nccl_process_groups(NcclGroupMaker make) {
  supplied_maker() = make;
  return true;
}

bool nccl_supported() {
  return maker() != nullptr;
}

std::shared_ptr<ProcessGroup> nccl_process_group(std::shared_ptr<ProcessGroup> bootstrap,
                                                 Device device, ProcessGroupOptions options) {
  NcclGroupMaker make = maker();
  if (make == nullptr) {
    const CudaPluginLoad& plugin = load_cuda_plugin();
    fail(plugin.error.empty() ? "this build of dprun has no CUDA support" : plugin.error,
         ", so no NCCL process group");
  }
  return make(std::move(bootstrap), device, options);
}

}  // namespace dprun
