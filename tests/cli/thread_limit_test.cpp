// OMP_THREAD_LIMIT below a device's core share (cpu:0 alone holds every core): dprun sizes its
// OpenMP teams to the limit, so oneDNN, which divides its work by omp_get_max_threads(), never
// waits for threads the limit keeps from starting (it spun forever in a convolution's weight
// gradient before).
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "cli_test_util.h"

namespace dprun::testing {
namespace {

TEST(ThreadLimit, TrainingACnnUnderOmpThreadLimitOneFinishes) {
  const std::filesystem::path out = scratch_path("thread_limit.onnx");
  const std::string data = source_path("models/training/cnn_bn_dp3");
  // `timeout` turns a hang into exit status 124 instead of a stuck test; a run takes about a
  // second.
  const CommandResult r =
      run_shell("OMP_THREAD_LIMIT=1 timeout 120 " + std::string(DPRUN_BINARY) + " train " + data +
                ".onnx --input x=" + data + ".x.npy --target " + data +
                ".target.npy --loss cross_entropy --optimizer sgd --lr 0.1 --batch 10 --steps 3 "
                "--devices cpu:0 --save " +
                out.string() + " 2>&1");
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("saved " + out.string()), std::string::npos) << r.output;
  std::filesystem::remove(out);
}

}  // namespace
}  // namespace dprun::testing
