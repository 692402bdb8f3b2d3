#include "engine/half.h"

#include "engine/simd_clones.h"

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

// The block conversions are the scalar ones written without branches, as selects between
// values computed for every lane, so that each clone vectorises them; the table lookup of
// Float16's scalar widening would be a gather.

DPRUN_SIMD_CLONES void widen(const Float16* in, float* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const uint32_t h = in[i].bits;
    const uint32_t magnitude = (h & 0x7fffu) << 13;  // exponent and mantissa in float place
    const uint32_t exponent = magnitude & 0x0f800000u;
    // Rebias the exponent by 127 - 15; infinities and NaNs by 255 - 31.
    uint32_t bits = magnitude + (exponent == 0x0f800000u ? 0x70000000u : 0x38000000u);
    // Subnormals (exponent 0): the value 2^-14 * 0.mantissa, made exact by float arithmetic as
    // (2^-14 * 1.mantissa) - 2^-14.
    const float subnormal = std::bit_cast<float>(bits + 0x00800000u) - 6.103515625e-05f;
    bits = exponent == 0 ? std::bit_cast<uint32_t>(subnormal) : bits;
    out[i] = std::bit_cast<float>(bits | ((h & 0x8000u) << 16));
  }
}

DPRUN_SIMD_CLONES void widen(const BFloat16* in, float* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i)
    out[i] = std::bit_cast<float>(static_cast<uint32_t>(in[i].bits) << 16);
}

DPRUN_SIMD_CLONES void narrow(const float* in, Float16* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const uint32_t x = std::bit_cast<uint32_t>(in[i]);
    const uint32_t sign = (x >> 16) & 0x8000u;
    const uint32_t abs = x & 0x7fffffffu;
    // Normal results: as Float16::from_float.
    uint32_t normal = (abs - 0x38000000u) >> 13;
    normal += ((abs & 0x1fffu) + 0xfffu + (normal & 1u)) >> 13;
    // Subnormal results (below 2^-14): adding 0.5 aligns the value's bits to float16's
    // subnormal step, and the float addition rounds to nearest even as wanted.
    const uint32_t subnormal =
        std::bit_cast<uint32_t>(std::bit_cast<float>(abs) + 0.5f) - 0x3f000000u;
    uint32_t h = abs < 0x38800000u ? subnormal : normal;
    h = abs >= 0x477ff000u ? 0x7c00u : h;  // overflow: infinity
    h = abs > 0x7f800000u ? 0x7e00u : h;   // NaN: the quiet NaN
    out[i].bits = static_cast<uint16_t>(sign | h);
  }
}

DPRUN_SIMD_CLONES void narrow(const float* in, BFloat16* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const uint32_t x = std::bit_cast<uint32_t>(in[i]);
    const uint32_t rounded = (x + 0x7fffu + ((x >> 16) & 1u)) >> 16;
    const uint32_t nan = (x >> 16) | 0x40u;
    out[i].bits = static_cast<uint16_t>((x & 0x7fffffffu) > 0x7f800000u ? nan : rounded);
  }
}

}  // namespace dprun
