#pragma once
// Float16 and bfloat16 on the device: the engine's storage types (engine/half.h) converted to
// and from float exactly as the CPU converts them, NaNs included, so a CUDA kernel storing a
// 16-bit result gives the CPU kernel's bits.
#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

#include "engine/half.h"

namespace dprun::cuda_half {

template <class T>
inline constexpr bool is_16bit_v = std::is_same_v<T, Float16> || std::is_same_v<T, BFloat16>;

__device__ inline float to_float(Float16 h) {
  // engine/half.h keeps a NaN's payload when widening; build such NaNs by hand.
  const uint32_t sign = static_cast<uint32_t>(h.bits & 0x8000u) << 16;
  const uint32_t mantissa = h.bits & 0x3ffu;
  if ((h.bits & 0x7c00u) == 0x7c00u && mantissa != 0)
    return __uint_as_float(sign | 0x7f800000u | (mantissa << 13));
  return __half2float(__ushort_as_half(h.bits));
}

__device__ inline float to_float(BFloat16 b) {
  return __uint_as_float(static_cast<uint32_t>(b.bits) << 16);
}

/// Rounds to nearest even. engine/half.h narrows every NaN to the quiet NaN 0x7e00 with f's
/// sign; cvt would give 0x7fff.
template <class T>
__device__ inline T from_float(float f) {
  T out;
  const uint32_t x = __float_as_uint(f);
  if constexpr (std::is_same_v<T, Float16>) {
    out.bits = isnan(f) ? static_cast<uint16_t>(((x >> 16) & 0x8000u) | 0x7e00u)
                        : __half_as_ushort(__float2half_rn(f));
  } else {
    // engine/half.h's BFloat16::from_float: NaNs quieted, others rounded to nearest even.
    out.bits = (x & 0x7fffffffu) > 0x7f800000u
                   ? static_cast<uint16_t>((x >> 16) | 0x40u)
                   : static_cast<uint16_t>((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
  }
  return out;
}

/// The type a kernel computes a T in: float for the 16-bit types, T itself otherwise.
template <class T>
using compute_t = std::conditional_t<is_16bit_v<T>, float, T>;

/// A stored element as the kernel computes with it.
template <class T>
__device__ inline compute_t<T> load(T v) {
  if constexpr (is_16bit_v<T>)
    return to_float(v);
  else
    return v;
}

/// A computed value stored as a T (16-bit types rounded once, to nearest even).
template <class T, class C>
__device__ inline T store(C v) {
  if constexpr (is_16bit_v<T>)
    return from_float<T>(static_cast<float>(v));
  else
    return static_cast<T>(v);
}

}  // namespace dprun::cuda_half
