#include "engine/half.h"

namespace dprun {

namespace {
constexpr std::array<float, 65536> float16_values() {
  std::array<float, 65536> values{};
  for (uint32_t h = 0; h < 65536; ++h) values[h] = Float16::to_float(static_cast<uint16_t>(h));
  return values;
}
}  // namespace

// Constant-initialized: ready before any dynamic initializer that converts a value.
constinit const std::array<float, 65536> Float16::kValues = float16_values();

}  // namespace dprun
