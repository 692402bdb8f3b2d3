#pragma once
// Versions of the CUDA libraries this build runs with, for diagnostics.
#include <string>

namespace dprun {

/// "CUDA runtime 13.0, driver none, cuBLAS 13.1.0, cuBLASLt 13.1.0, cuDNN 9.19.0, NCCL 2.28.9":
/// the versions of the loaded libraries as each reports it, and the driver's CUDA version
/// ("none" without a driver). Needs no GPU.
std::string cuda_library_versions();

}  // namespace dprun
