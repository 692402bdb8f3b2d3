#pragma once
// Tests that take a device type: the same test runs on every accelerator the build has. The
// simulated devices (sim:N, engine/backends/sim) are always there, so every such test runs on
// this machine and in CI; on CUDA GPUs it runs where a GPU is present and skips, saying why,
// elsewhere. Instantiate a suite with DPRUN_ON_ACCELERATORS(Suite): its tests are named
// OnAccelerators/Suite.Test/sim and OnAccelerators/Suite.Test/cuda. A DeviceTest suite runs on
// the CPU too (DPRUN_ON_EVERY_DEVICE: OnDevices/Suite.Test/cpu, /sim, /cuda).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "cuda_test_util.h"
#include "engine/backend.h"

namespace dprun::testing {

/// The accelerator types of this build: sim, and cuda where the build has a CUDA backend.
inline std::vector<DeviceType> accelerator_types() {
  std::vector<DeviceType> types = {DeviceType::Sim};
  try {
    backend_for(DeviceType::CUDA);
    types.push_back(DeviceType::CUDA);
  } catch (const Error&) {
  }
  return types;
}

/// Why devices of `type` cannot be used here; empty when they can.
inline std::string accelerator_unusable_reason(DeviceType type) {
  return type == DeviceType::CUDA ? cuda_unusable_reason() : "";
}

/// The devices a data-parallel test spreads over: every GPU, or sim:0 and sim:1.
inline std::vector<Device> accelerator_devices(DeviceType type) {
  if (type == DeviceType::Sim) return {Device::sim(0), Device::sim(1)};
  std::vector<Device> out;
  for (int i = 0; i < backend_for(type).device_count(); ++i) out.push_back({type, i});
  return out;
}

/// A test fixture whose parameter is the accelerator type.
class AcceleratorTest : public ::testing::TestWithParam<DeviceType> {
 protected:
  void SetUp() override {
    const std::string why = accelerator_unusable_reason(GetParam());
    if (!why.empty())
      GTEST_SKIP() << "needs a " << device_type_name(GetParam()) << " device: " << why;
  }
  Device device(int index = 0) const { return {GetParam(), index}; }
  std::vector<Device> devices() const { return accelerator_devices(GetParam()); }
};

/// A fixture whose tests take one device: cpu:1 on the CPU (a CPU device that is not the host's
/// default, so a result left on cpu:0 shows), else device 0 of the accelerator.
class DeviceTest : public AcceleratorTest {
 protected:
  Device device() const {
    return GetParam() == DeviceType::CPU ? Device::cpu(1) : AcceleratorTest::device();
  }
};

/// The CPU, then accelerator_types().
inline std::vector<DeviceType> every_device_type() {
  std::vector<DeviceType> types = {DeviceType::CPU};
  for (DeviceType t : accelerator_types()) types.push_back(t);
  return types;
}

inline std::string accelerator_name(const ::testing::TestParamInfo<DeviceType>& info) {
  return std::string(device_type_name(info.param));
}

}  // namespace dprun::testing

#define DPRUN_ON_ACCELERATORS(Suite)                                                   \
  INSTANTIATE_TEST_SUITE_P(OnAccelerators, Suite,                                      \
                           ::testing::ValuesIn(::dprun::testing::accelerator_types()), \
                           ::dprun::testing::accelerator_name)

#define DPRUN_ON_EVERY_DEVICE(Suite)                                                   \
  INSTANTIATE_TEST_SUITE_P(OnDevices, Suite,                                           \
                           ::testing::ValuesIn(::dprun::testing::every_device_type()), \
                           ::dprun::testing::accelerator_name)
