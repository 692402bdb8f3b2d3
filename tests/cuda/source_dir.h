#pragma once
// The source tree the CUDA tests read models from: $DPRUN_SOURCE_DIR when set (a GPU machine
// running tools/gpu-bundle.sh's archive, whose run.sh sets it), else the configured one.

#include <cstdlib>
#include <string>

namespace dprun::testing {

inline std::string cuda_test_source_dir() {
  const char* root = std::getenv("DPRUN_SOURCE_DIR");
  return root != nullptr && *root ? std::string(root) : std::string(DPRUN_SOURCE_DIR);
}

}  // namespace dprun::testing
