#pragma once
// 16-bit floating point storage types. Arithmetic happens in float; these only convert.
#include <array>
#include <bit>
#include <cstdint>
#include <cstring>

namespace dprun {

/// IEEE 754 binary16, stored as bits; converts to and from float with round-to-nearest-even.
struct Float16 {
  uint16_t bits = 0;
  Float16() = default;
  explicit Float16(float f) : bits(from_float(f)) {}
  /// By table (engine/half.cpp): the bit-by-bit widening below costs several times more per
  /// element than a cached load in the 16-bit CPU kernels, which widen every operand.
  explicit operator float() const { return kValues[bits]; }

  static uint16_t from_float(float f) {
    uint32_t x = std::bit_cast<uint32_t>(f);
    uint32_t sign = (x >> 16) & 0x8000u;
    uint32_t abs = x & 0x7fffffffu;
    if (abs >= 0x7f800000u) {  // inf or nan
      return static_cast<uint16_t>(sign | 0x7c00u | (abs > 0x7f800000u ? 0x200u : 0u));
    }
    if (abs >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // overflow -> inf
    if (abs < 0x38800000u) {  // subnormal or zero in half
      if (abs < 0x33000000u) return static_cast<uint16_t>(sign);
      uint32_t mant = (abs & 0x7fffffu) | 0x800000u;
      int shift = 126 - static_cast<int>(abs >> 23);  // 14..24
      uint32_t half = mant >> shift;
      uint32_t rem = mant & ((1u << shift) - 1);
      uint32_t mid = 1u << (shift - 1);
      if (rem > mid || (rem == mid && (half & 1u))) ++half;
      return static_cast<uint16_t>(sign | half);
    }
    // Round to nearest even without a branch on the dropped bits, which follow the data: add 1
    // when they exceed half a step, or equal it and the kept bits are odd.
    uint32_t h = (abs - 0x38000000u) >> 13;
    h += ((abs & 0x1fffu) + 0xfffu + (h & 1u)) >> 13;
    return static_cast<uint16_t>(sign | h);
  }

  /// Every float16 value as a float, indexed by its bits.
  static const std::array<float, 65536> kValues;

  static constexpr float to_float(uint16_t h) {
    uint32_t sign = (h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu;
    uint32_t mant = h & 0x3ffu;
    uint32_t bits;
    if (exp == 0) {
      if (mant == 0) {
        bits = sign;
      } else {  // subnormal: normalise
        int e = -1;
        do {
          ++e;
          mant <<= 1;
        } while ((mant & 0x400u) == 0);
        bits = sign | ((112u - e) << 23) | ((mant & 0x3ffu) << 13);
      }
    } else if (exp == 31) {
      bits = sign | 0x7f800000u | (mant << 13);
    } else {
      bits = sign | ((exp + 112u) << 23) | (mant << 13);
    }
    return std::bit_cast<float>(bits);
  }
};

/// bfloat16: the upper half of a float32, rounded to nearest even.
struct BFloat16 {
  uint16_t bits = 0;
  BFloat16() = default;
  explicit BFloat16(float f) : bits(from_float(f)) {}
  explicit operator float() const {
    return std::bit_cast<float>(static_cast<uint32_t>(bits) << 16);
  }

  static uint16_t from_float(float f) {
    uint32_t x = std::bit_cast<uint32_t>(f);
    if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x40u);
    uint32_t rounding = 0x7fffu + ((x >> 16) & 1u);
    return static_cast<uint16_t>((x + rounding) >> 16);
  }
};

/// Block conversions, bit for bit what the scalar conversions above give (NaNs included), in
/// loops that run 8 or 16 lanes wide (engine/simd_clones.h): out[i] = in[i] converted, i < n.
void widen(const Float16* in, float* out, int64_t n);
void widen(const BFloat16* in, float* out, int64_t n);
void narrow(const float* in, Float16* out, int64_t n);
void narrow(const float* in, BFloat16* out, int64_t n);

}  // namespace dprun
