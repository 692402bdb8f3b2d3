// mpi_process_group.h for builds without MPI (compiled instead of mpi_process_group.cpp).
#include "engine/distributed/mpi_process_group.h"

namespace dprun {

bool mpi_supported() {
  return false;
}

std::shared_ptr<ProcessGroup> mpi_world_process_group(ProcessGroupOptions) {
  fail("this build of dprun has no MPI support");
}

}  // namespace dprun
