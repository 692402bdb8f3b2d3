#pragma once
// Device identity: a value type naming where a tensor lives or a replica runs.
#include <compare>
#include <string>
#include <string_view>

namespace dprun {

enum class DeviceType { CPU, CUDA };

/// A device such as cpu:0 or cuda:1. CPU devices are virtual: any index is valid.
struct Device {
  DeviceType type = DeviceType::CPU;
  int index = 0;

  static Device cpu(int index = 0) { return {DeviceType::CPU, index}; }
  static Device cuda(int index = 0) { return {DeviceType::CUDA, index}; }
  /// Parses "cpu", "cpu:3", "cuda:1", "cuda"; throws Error otherwise.
  static Device parse(std::string_view text);
  std::string to_string() const;
  auto operator<=>(const Device&) const = default;
};

std::string_view device_type_name(DeviceType type);

}  // namespace dprun
