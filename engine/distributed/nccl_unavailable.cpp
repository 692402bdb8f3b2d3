// nccl_process_group.h for builds without CUDA (the CUDA backend defines it otherwise).
#include "engine/distributed/nccl_process_group.h"

namespace dprun {

bool nccl_supported() {
  return false;
}

std::shared_ptr<ProcessGroup> nccl_process_group(std::shared_ptr<ProcessGroup>, Device,
                                                 ProcessGroupOptions) {
  fail("this build of dprun has no CUDA support, so no NCCL process group");
}

}  // namespace dprun
