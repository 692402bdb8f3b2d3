// The CUDA libraries the build links: each answers for its version without a GPU.
#include "engine/backends/cuda/cuda_libraries.h"

#include <cudnn.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nccl.h>

#include <string>

#include "engine/backends/cuda/cuda_check.h"

namespace dprun {
namespace {

TEST(CudaLibraries, EachReportsItsVersion) {
  // The major versions are the headers' this build was compiled with.
  const std::string n = "[0-9]+";
  const std::string pattern = "CUDA runtime " + std::to_string(CUDART_VERSION / 1000) + "\\." + n +
                              ", driver (none|" + n + "\\." + n + "), cuBLAS " +
                              std::to_string(CUBLAS_VER_MAJOR) + "\\." + n + "\\." + n +
                              ", cuBLASLt " + std::to_string(CUBLAS_VER_MAJOR) + "\\." + n + "\\." +
                              n + ", cuDNN " + std::to_string(CUDNN_MAJOR) + "\\." + n + "\\." + n +
                              ", NCCL " + std::to_string(NCCL_MAJOR) + "\\." + n + "\\." + n;
  EXPECT_THAT(cuda_library_versions(), ::testing::MatchesRegex(pattern));
}

}  // namespace
}  // namespace dprun
