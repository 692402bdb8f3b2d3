// --distributed and its options on the command line, in builds with and without MPI. Runs
// under mpirun are tested in tests/mpi.
#include <gtest/gtest.h>

#include <filesystem>

#include "cli_test_util.h"
#include "engine/distributed/mpi_process_group.h"

namespace dprun {
namespace {

namespace fs = std::filesystem;
using testing::run_dprun;
using testing::source_path;

std::string train_args(const fs::path& save) {
  return "train " + source_path("models/training/mlp_sgd.onnx") +
         " --input x=" + source_path("models/training/mlp_sgd.x.npy") + " --target " +
         source_path("models/training/mlp_sgd.target.npy") +
         " --loss cross_entropy --optimizer sgd --lr 0.1 --batch 10 --steps 2 --devices cpu:0"
         " --save " +
         save.string();
}

TEST(DistributedOptions, NeedMpiSupport) {
  fs::path save = fs::temp_directory_path() / "dprun_distributed_option.onnx";
  fs::remove(save);
  auto r = run_dprun(train_args(save) + " --distributed");
  if (mpi_supported()) {
    // Started without mpirun, the process is an MPI job of one rank.
    EXPECT_EQ(r.status, 0) << r.output;
    EXPECT_NE(r.output.find("distributed over 1 rank (mpi)"), std::string::npos) << r.output;
    EXPECT_TRUE(fs::exists(save));
  } else {
    EXPECT_EQ(r.status, 1);
    EXPECT_EQ(r.output, "dprun: error: this build of dprun has no MPI support\n");
    EXPECT_FALSE(fs::exists(save));
  }
  fs::remove(save);
}

TEST(DistributedOptions, AreUsageErrorsWithoutDistributed) {
  // Its own file: ctest runs NeedMpiSupport, which writes its file, at the same time.
  fs::path save = fs::temp_directory_path() / "dprun_distributed_usage_error.onnx";
  fs::remove(save);
  for (const char* option :
       {"--deterministic", "--bucket-mb 4", "--timeout 60", "--dist-backend mpi"}) {
    auto r = run_dprun(train_args(save) + " " + option);
    EXPECT_EQ(r.status, 2);
    std::string name = std::string(option).substr(0, std::string(option).find(' '));
    EXPECT_EQ(r.output, "dprun: error: " + name + " requires --distributed\n");
  }
  auto r = run_dprun(train_args(save) + " --distributed --timeout 0");
  EXPECT_EQ(r.status, 2);
  EXPECT_EQ(r.output, "dprun: error: --timeout must be a positive number, got '0'\n");
  EXPECT_FALSE(fs::exists(save));
}

TEST(DistributedOptions, DistBackendNamesMpiOrNcclOnAGpu) {
  fs::path save = fs::temp_directory_path() / "dprun_distributed_dist_backend.onnx";
  fs::remove(save);
  if (!mpi_supported()) GTEST_SKIP() << "this build of dprun has no MPI support";
  auto r = run_dprun(train_args(save) + " --distributed --dist-backend gloo");
  EXPECT_EQ(r.status, 2);
  // A usage error found after the ranks joined is one rank's: it is named.
  EXPECT_EQ(r.output, "dprun: error: rank 0: --dist-backend must be mpi or nccl, got 'gloo'\n");
  r = run_dprun(train_args(save) + " --distributed --dist-backend nccl");
  EXPECT_EQ(r.status, 2);
  EXPECT_EQ(
      r.output,
      "dprun: error: rank 0: --dist-backend nccl sums gradients in GPU memory: the first device "
      "must be a GPU (cuda:N), not cpu:0\n");
  EXPECT_FALSE(fs::exists(save));
  r = run_dprun(train_args(save) + " --distributed --dist-backend mpi");
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("distributed over 1 rank (mpi)"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("MPI's reduction"), std::string::npos) << r.output;
  fs::remove(save);
}

}  // namespace
}  // namespace dprun
