#pragma once
// Binary elementwise math functors, shared by the CPU and CUDA kernels. Integer
// arithmetic wraps around (computed in unsigned types) instead of overflowing; callers reject
// integer division by zero before applying Div or Mod.
#include <cmath>
#include <cstdint>
#include <type_traits>

#include "ops/math/host_device.h"
#include "ops/math/select.h"

namespace dprun::math {

/// An unsigned type at least as wide as T and as int, so arithmetic on it never promotes to a
/// signed type (where overflow would be undefined).
template <class T>
using wide_unsigned_t = std::conditional_t<(sizeof(T) <= 4), uint32_t, uint64_t>;

struct Add {
  template <class T>
  DPRUN_HOST_DEVICE T operator()(T a, T b) const {
    if constexpr (std::is_integral_v<T>) {
      using U = wide_unsigned_t<T>;
      return static_cast<T>(static_cast<U>(a) + static_cast<U>(b));
    } else {
      return a + b;
    }
  }
};

struct Sub {
  template <class T>
  DPRUN_HOST_DEVICE T operator()(T a, T b) const {
    if constexpr (std::is_integral_v<T>) {
      using U = wide_unsigned_t<T>;
      return static_cast<T>(static_cast<U>(a) - static_cast<U>(b));
    } else {
      return a - b;
    }
  }
};

struct Mul {
  template <class T>
  DPRUN_HOST_DEVICE T operator()(T a, T b) const {
    if constexpr (std::is_integral_v<T>) {
      using U = wide_unsigned_t<T>;
      return static_cast<T>(static_cast<U>(a) * static_cast<U>(b));
    } else {
      return a * b;
    }
  }
};

/// Integer division truncates toward zero, like C.
struct Div {
  template <class T>
  DPRUN_HOST_DEVICE T operator()(T a, T b) const {
    if constexpr (std::is_integral_v<T> && std::is_signed_v<T>) {
      if (b == T(-1))
        return static_cast<T>(wide_unsigned_t<T>(0) - static_cast<wide_unsigned_t<T>>(a));
      return static_cast<T>(a / b);
    } else {
      return static_cast<T>(a / b);
    }
  }
};

/// fmod = 1: the remainder takes the dividend's sign (C fmod / %). fmod = 0: it takes the
/// divisor's sign (Python / numpy mod).
struct Mod {
  bool fmod = false;
  template <class T>
  DPRUN_HOST_DEVICE T operator()(T a, T b) const {
    if constexpr (std::is_floating_point_v<T>) {
      T r = std::fmod(a, b);
      if (!fmod && r != T(0) && ((r < T(0)) != (b < T(0)))) r += b;
      return r;
    } else if constexpr (std::is_signed_v<T>) {
      if (b == T(-1)) return T(0);  // also avoids INT_MIN % -1
      T r = static_cast<T>(a % b);
      if (!fmod && r != T(0) && ((r < T(0)) != (b < T(0)))) r = static_cast<T>(r + b);
      return r;
    } else {
      return static_cast<T>(a % b);
    }
  }
};

/// Integer power by squaring; negative exponents truncate 1 / a^-e toward zero.
template <class T, class E>
DPRUN_HOST_DEVICE T int_pow(T a, E e) {
  if constexpr (std::is_signed_v<E>) {
    if (e < E(0)) {
      if (a == T(1)) return T(1);
      if constexpr (std::is_signed_v<T>)
        if (a == T(-1)) return (e % 2 == 0) ? T(1) : T(-1);
      return T(0);
    }
  }
  using U = wide_unsigned_t<T>;
  U result = 1, base = static_cast<U>(a);
  auto n = static_cast<std::make_unsigned_t<E>>(e);
  while (n) {
    if (n & 1u) result *= base;
    base *= base;
    n >>= 1;
  }
  return static_cast<T>(result);
}

/// Pow with independent base (T) and exponent (E) types; the result has the base's type.
/// Floating bases compute in their own type; integer bases with floating exponents compute
/// in double.
struct Pow {
  template <class T, class E>
  DPRUN_HOST_DEVICE auto operator()(T a, E b) const {
    if constexpr (std::is_floating_point_v<T>) {
      return static_cast<T>(std::pow(a, static_cast<T>(b)));
    } else if constexpr (std::is_integral_v<E>) {
      return int_pow(a, b);
    } else {
      return std::pow(static_cast<double>(a), static_cast<double>(b));  // converted by caller
    }
  }
};

/// Min/Max propagate NaN, as numpy.minimum/maximum do.
struct Min {
  template <class T>
  DPRUN_HOST_DEVICE T operator()(T a, T b) const {
    if constexpr (std::is_floating_point_v<T>) {
      if (a != a) return a;
      if (b != b) return b;
    }
    return b < a ? b : a;
  }
};

struct Max {
  template <class T>
  DPRUN_HOST_DEVICE T operator()(T a, T b) const {
    if constexpr (std::is_floating_point_v<T>) {
      if (a != a) return a;
      if (b != b) return b;
    }
    return b > a ? b : a;
  }
};

#define DPRUN_COMPARE(Name, expr)                       \
  struct Name {                                         \
    template <class T>                                  \
    DPRUN_HOST_DEVICE bool operator()(T a, T b) const { \
      return expr;                                      \
    }                                                   \
  };
DPRUN_COMPARE(Equal, a == b)
DPRUN_COMPARE(Less, a < b)
DPRUN_COMPARE(LessOrEqual, a <= b)
DPRUN_COMPARE(Greater, a > b)
DPRUN_COMPARE(GreaterOrEqual, a >= b)
DPRUN_COMPARE(And, a&& b)
DPRUN_COMPARE(Or, a || b)
DPRUN_COMPARE(Xor, a != b)
#undef DPRUN_COMPARE

struct BitwiseAnd {
  template <class T>
  DPRUN_HOST_DEVICE T operator()(T a, T b) const {
    return static_cast<T>(a & b);
  }
};
struct BitwiseOr {
  template <class T>
  DPRUN_HOST_DEVICE T operator()(T a, T b) const {
    return static_cast<T>(a | b);
  }
};
struct BitwiseXor {
  template <class T>
  DPRUN_HOST_DEVICE T operator()(T a, T b) const {
    return static_cast<T>(a ^ b);
  }
};

/// Shifts of unsigned integers; shifting by the bit width or more gives 0.
struct BitShift {
  bool left = true;
  template <class T>
  DPRUN_HOST_DEVICE T operator()(T a, T b) const {
    if (b >= T(sizeof(T) * 8)) return T(0);
    using U = wide_unsigned_t<T>;
    return static_cast<T>(left ? static_cast<U>(a) << b : static_cast<U>(a) >> b);
  }
};

/// PRelu: x where x >= 0, slope * x elsewhere.
struct PRelu {
  template <class T>
  DPRUN_HOST_DEVICE T operator()(T x, T slope) const {
    return select(x < T(0), static_cast<T>(slope * x), x);
  }
};

/// Relu's gradient: dy * (x > 0 ? 1 : 0), the product Mul(dY, Cast(Greater(X, 0))) gives (an
/// infinite or NaN dy where x <= 0 gives NaN).
struct ReluGrad {
  template <class T>
  DPRUN_HOST_DEVICE T operator()(T dy, T x) const {
    return dy * select(x > T(0), T(1), T(0));
  }
};

}  // namespace dprun::math
