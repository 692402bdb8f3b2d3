// `dprun conformance --device DEV`: the suite on another device, and the errors for a device
// that cannot be used or cannot be parsed.
#include <gtest/gtest.h>

#include <string>

#include "cli_test_util.h"

namespace dprun::testing {
namespace {

TEST(ConformanceDevice, RunsTheSuiteOnTheNamedDevice) {
  auto r = run_dprun("conformance --suite node --filter test_abs --device cpu:1 --verbose");
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("PASS node/test_abs\n"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("node                  1 passed,    0 failed,    0 skipped\n"),
            std::string::npos)
      << r.output;
}

TEST(ConformanceDevice, AGpuThatCannotBeUsedStopsTheRunAtOnce) {
  auto r = run_dprun("conformance --suite node --filter test_abs --device cuda:0");
  if (r.status == 0) GTEST_SKIP() << "a CUDA GPU is present";
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_TRUE(r.output == "dprun: error: device cuda:0: no CUDA GPU is present\n" ||
              r.output == "dprun: error: device cuda:0: this build of dprun has no CUDA support\n")
      << r.output;
}

TEST(ConformanceDevice, AMalformedDeviceIsAUsageError) {
  auto r = run_dprun("conformance --device tpu:0");
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_NE(r.output.find("dprun: error: --device: invalid device 'tpu:0': expected cpu[:N], "
                          "cuda[:N] or sim[:N]\n"),
            std::string::npos)
      << r.output;
}

}  // namespace
}  // namespace dprun::testing
