#pragma once
// Tests that need a CUDA GPU skip, giving the reason, where none can be used: a build without
// the CUDA backend, a machine without a driver, or one without a GPU.
#include <gtest/gtest.h>

#include <string>

#include "engine/backend.h"
#include "engine/error.h"

namespace dprun::testing {

/// Why cuda:0 cannot be used here, as dprun reports it ("device cuda:0: no CUDA GPU is
/// present", "device cuda:0: this build of dprun has no CUDA support"); empty when it can.
inline std::string cuda_unusable_reason() {
  if (backend_available(DeviceType::CUDA)) return "";
  try {
    backend_for(Device::cuda(0)).check_device(Device::cuda(0));
  } catch (const Error& e) {
    return e.what();
  }
  return "the CUDA backend reports no device";
}

}  // namespace dprun::testing

/// Skips the calling test, with the reason, when no CUDA GPU can be used.
#define DPRUN_REQUIRE_CUDA_GPU()                                                     \
  do {                                                                               \
    std::string dprun_no_gpu = ::dprun::testing::cuda_unusable_reason();             \
    if (!dprun_no_gpu.empty()) GTEST_SKIP() << "needs a CUDA GPU: " << dprun_no_gpu; \
  } while (0)

/// Skips the calling test, with the reason, unless at least `n` CUDA GPUs can be used.
#define DPRUN_REQUIRE_CUDA_GPUS(n)                                                   \
  do {                                                                               \
    DPRUN_REQUIRE_CUDA_GPU();                                                        \
    int dprun_gpus = ::dprun::backend_for(::dprun::DeviceType::CUDA).device_count(); \
    if (dprun_gpus < (n))                                                            \
      GTEST_SKIP() << "needs " << (n) << " CUDA GPUs: " << dprun_gpus << " present"; \
  } while (0)
