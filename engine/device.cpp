#include "engine/device.h"

#include <charconv>

#include "engine/error.h"

namespace dprun {

std::string_view device_type_name(DeviceType type) {
  switch (type) {
    case DeviceType::CPU:
      return "cpu";
    case DeviceType::CUDA:
      return "cuda";
    case DeviceType::Sim:
      return "sim";
  }
  return "unknown";
}

Device Device::parse(std::string_view text) {
  std::string_view kind = text;
  int index = 0;
  if (size_t colon = text.find(':'); colon != std::string_view::npos) {
    kind = text.substr(0, colon);
    std::string_view digits = text.substr(colon + 1);
    auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), index);
    if (digits.empty() || ec != std::errc() || end != digits.data() + digits.size() || index < 0)
      fail("invalid device '", text, "': the index must be a non-negative integer");
  }
  if (kind == "cpu") return cpu(index);
  if (kind == "cuda" || kind == "gpu") return cuda(index);
  if (kind == "sim") return sim(index);
  fail("invalid device '", text, "': expected cpu[:N], cuda[:N] or sim[:N]");
}

std::string Device::to_string() const {
  return std::string(device_type_name(type)) + ":" + std::to_string(index);
}

}  // namespace dprun
