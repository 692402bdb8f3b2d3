#pragma once
// Branch-free select for the elementwise functors. GCC (with its default -ftrapping-math)
// will not if-convert `c ? a : b` when a or b needs floating-point work, so such loops stay
// scalar; blending the bit patterns with a mask keeps them vectorisable.
#include <bit>
#include <cstdint>
#include <type_traits>

#include "ops/math/host_device.h"

namespace dprun::math {

template <class T>
DPRUN_HOST_DEVICE inline T select(bool c, T a, T b) {
#if !defined(__CUDA_ARCH__)
  if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
    using Bits = std::conditional_t<std::is_same_v<T, float>, uint32_t, uint64_t>;
    const Bits mask = Bits(0) - static_cast<Bits>(c);
    return std::bit_cast<T>(
        static_cast<Bits>((std::bit_cast<Bits>(a) & mask) | (std::bit_cast<Bits>(b) & ~mask)));
  } else {
    return c ? a : b;
  }
#else
  return c ? a : b;
#endif
}

}  // namespace dprun::math
