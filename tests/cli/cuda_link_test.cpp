// The dprun executable needs the CUDA libraries (ldd lists them) exactly when the build has
// the CUDA backend, and every library it needs is found.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <string>

namespace dprun::testing {
namespace {

std::string ldd_of_dprun() {
  std::string command = std::string("ldd ") + DPRUN_BINARY + " 2>&1";
  std::string output;
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return output;
  std::array<char, 4096> buffer;
  size_t n;
  while ((n = fread(buffer.data(), 1, buffer.size(), pipe)) > 0) output.append(buffer.data(), n);
  pclose(pipe);
  return output;
}

TEST(CudaLink, LddListsTheCudaLibrariesExactlyWhenBuiltWithCuda) {
  const std::string ldd = ldd_of_dprun();
  ASSERT_NE(ldd.find("libdprun.so"), std::string::npos) << ldd;
  EXPECT_EQ(ldd.find("not found"), std::string::npos) << ldd;
  for (const char* library :
       {"libcudart.so", "libcublas.so", "libcublasLt.so", "libcudnn.so", "libnccl.so"}) {
    bool listed = ldd.find(std::string("\t") + library) != std::string::npos;
    EXPECT_EQ(listed, bool(DPRUN_WITH_CUDA)) << library << " in\n" << ldd;
  }
}

}  // namespace
}  // namespace dprun::testing
