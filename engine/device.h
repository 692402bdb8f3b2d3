#pragma once
// Device identity: a value type naming where a tensor lives or a replica runs.
#include <compare>
#include <string>
#include <string_view>

namespace dprun {

/// CPU: virtual devices sharing host memory. CUDA: NVIDIA GPUs. Sim: simulated accelerators
/// (engine/backends/sim): host memory behind a device boundary, running the plan a GPU would
/// run with the CPU's kernels, so the cross-device paths are tested on machines without a GPU.
enum class DeviceType { CPU, CUDA, Sim };

/// A device such as cpu:0 or cuda:1. CPU devices are virtual: any index is valid.
struct Device {
  DeviceType type = DeviceType::CPU;
  int index = 0;

  static Device cpu(int index = 0) { return {DeviceType::CPU, index}; }
  static Device cuda(int index = 0) { return {DeviceType::CUDA, index}; }
  static Device sim(int index = 0) { return {DeviceType::Sim, index}; }
  /// Parses "cpu", "cpu:3", "cuda:1", "cuda", "sim:2"; throws Error otherwise.
  static Device parse(std::string_view text);
  std::string to_string() const;
  auto operator<=>(const Device&) const = default;
};

std::string_view device_type_name(DeviceType type);

}  // namespace dprun
