#pragma once
// Unary elementwise math functors, shared by the CPU and CUDA kernels. Each is
// applied to float, double or an integer type; 16-bit floats are computed in float.
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "ops/math/host_device.h"
#include "ops/math/select.h"

namespace dprun::math {

/// exp(x) for float32 by range reduction and a degree-6 polynomial (Cephes), with x first
/// clamped to [-87, 89]: a few ulp on [-87, 88.3]; exp(-87) ~ 1.6e-38 below (NaN included:
/// it compares false), +inf from 127.5 * ln 2 = 88.38 on (a little before float's true
/// overflow at 88.72). For callers to whom neither clamp matters (1 / (1 + exp(-x)) is 1 at
/// exp(-87) and 0 at +inf); fast_expf adds the guards. Vectorises where std::exp does not.
DPRUN_HOST_DEVICE inline float clamped_expf(float x) {
  x = select(x < 89.0f, x, 89.0f);
  x = select(x > -87.0f, x, -87.0f);
  // n = x * log2(e) rounded to the nearest integer: adding 1.5 * 2^23 leaves no fraction bits,
  // so the sum is rounded there (no float-to-int conversion, which the vectorised loop paid
  // for on every lane). Adding 127 more leaves n + 127, 2^n's biased exponent, in the sum's
  // low mantissa bits: shifted left by 23 they are 2^n's bits, and n = 128 gives +inf.
  constexpr float kRound = 12582912.0f + 127.0f;
  const float shifted = x * 1.44269504088896341f + kRound;
  const float fn = shifted - kRound;
  x = x - fn * 0.693359375f;
  x = x + fn * 2.12194440e-4f;
  const float z = x * x;
  float y = 1.9875691500e-4f;
  y = y * x + 1.3981999507e-3f;
  y = y * x + 8.3334519073e-3f;
  y = y * x + 4.1665795894e-2f;
  y = y * x + 1.6666665459e-1f;
  y = y * x + 5.0000001201e-1f;
  y = y * z + x + 1.0f;
#if defined(__CUDA_ARCH__)
  return y * __int_as_float(static_cast<int>(static_cast<unsigned>(__float_as_int(shifted)) << 23));
#else
  return y * std::bit_cast<float>(std::bit_cast<uint32_t>(shifted) << 23);
#endif
}

/// exp(x) for float32: clamped_expf, with results below exp(-87) ~ 1.6e-38 flushed to 0 and
/// NaN kept. The flush keeps every intermediate normal: a denormal product costs a microcode
/// assist per element, which made softmax over masked (-1e4) scores four times slower. It
/// serves activations, whose results tolerate the flushed tail.
DPRUN_HOST_DEVICE inline float fast_expf(float x) {
  const float y = select(x < -87.0f, 0.0f, clamped_expf(x));
  return select(x != x, x, y);
}

/// exp(x) for float32, correctly rounded: computed in double as 2^n e^r, with n = x log2(e)
/// rounded and r = x - n ln 2 (ln 2 split in two so that n ln2_hi is exact), e^r by its Taylor
/// polynomial to r^11 (relative error below 1e-14 for |r| <= ln 2 / 2), then rounded once to
/// float, denormal results included. glibc's scalar expf is within 0.502 ulp and differs from
/// the correctly rounded value in about one float in 13000 (checked against long double
/// expl); this one agrees with expl on every float tested (tests/unit/elementwise_test.cpp),
/// and it vectorises (no table, no branch): about 3x glibc's speed on AVX-512. Beyond float's
/// range x is clamped where the result is already +inf (89) or 0 (-104); NaN stays NaN. Host
/// code only: a GPU has its own expf.
inline float exp_rounded_from_double(float xf) {
  const double x = static_cast<double>(xf);
  const double c = select(x < 89.0, select(x > -104.0, x, -104.0), 89.0);
  // n rounded by adding 1.5 * 2^52 (no fraction bits left); the added 1023 leaves n + 1023,
  // 2^n's biased exponent, in the sum's low bits, which shifted left by 52 are 2^n's bits.
  constexpr double kRound = 6755399441055744.0 + 1023.0;
  const double shifted = c * 1.4426950408889634 + kRound;
  const double n = shifted - kRound;
  const double r = (c - n * 0.6931471803691238) - n * 1.9082149292705877e-10;
  double p = 1.0 / 39916800.0;
  for (double inverse_factorial : {1.0 / 3628800.0, 1.0 / 362880.0, 1.0 / 40320.0, 1.0 / 5040.0,
                                   1.0 / 720.0, 1.0 / 120.0, 1.0 / 24.0, 1.0 / 6.0, 0.5, 1.0, 1.0})
    p = p * r + inverse_factorial;
  const double scale = std::bit_cast<double>(std::bit_cast<uint64_t>(shifted) << 52);
  return select(xf != xf, xf, static_cast<float>(p * scale));
}

/// erfc(z) for float32 and z >= 0 (Numerical Recipes' erfcc: relative error below 1.2e-7 in
/// exact arithmetic), accurate in the tail where 1 - erf(z) would cancel; vectorisable.
DPRUN_HOST_DEVICE inline float fast_erfcf(float z) {
  const float t = 1.0f / (1.0f + 0.5f * z);
  float p = 0.17087277f;
  p = p * t - 0.82215223f;
  p = p * t + 1.48851587f;
  p = p * t - 1.13520398f;
  p = p * t + 0.27886807f;
  p = p * t - 0.18628806f;
  p = p * t + 0.09678418f;
  p = p * t + 0.37409196f;
  p = p * t + 1.00002368f;
  p = p * t - 1.26551223f;
  return t * fast_expf(p - z * z);
}

template <class T>
DPRUN_HOST_DEVICE inline T exp_of(T x) {
  if constexpr (std::is_same_v<T, float>)
    return fast_expf(x);
  else
    return std::exp(x);
}

// -x of an integer in two's complement: the minimum maps to itself, as numpy and
// PyTorch give, instead of the signed overflow that `-x` is in C++.
template <class T>
DPRUN_HOST_DEVICE inline T wrapping_negate(T x) {
  using U = std::make_unsigned_t<T>;
  return static_cast<T>(U(0) - static_cast<U>(x));
}

struct Abs {
  template <class T>
  DPRUN_HOST_DEVICE T operator()(T x) const {
    if constexpr (std::is_floating_point_v<T>)
      return std::fabs(x);
    else if constexpr (std::is_unsigned_v<T>)
      return x;
    else if constexpr (std::is_integral_v<T>)
      return x < T(0) ? wrapping_negate(x) : x;
    else
      return x < T(0) ? static_cast<T>(T(0) - x) : x;
  }
};

struct Neg {
  template <class T>
  DPRUN_HOST_DEVICE T operator()(T x) const {
    if constexpr (std::is_integral_v<T>)
      return wrapping_negate(x);
    else
      return -x;
  }
};

struct Sign {
  template <class T>
  DPRUN_HOST_DEVICE T operator()(T x) const {
    if constexpr (std::is_unsigned_v<T>) {
      return x > T(0) ? T(1) : T(0);  // nvcc warns on `x < 0` for unsigned types
    } else {
      if constexpr (std::is_floating_point_v<T>)
        if (x != x) return x;  // NaN stays NaN
      return x > T(0) ? T(1) : (x < T(0) ? static_cast<T>(-1) : T(0));
    }
  }
};

struct Reciprocal {
  template <class T>
  DPRUN_HOST_DEVICE T operator()(T x) const {
    return T(1) / x;
  }
};

#define DPRUN_STD_UNARY(Name, fn)               \
  struct Name {                                 \
    template <class T>                          \
    DPRUN_HOST_DEVICE T operator()(T x) const { \
      return std::fn(x);                        \
    }                                           \
  };
DPRUN_STD_UNARY(Sqrt, sqrt)
DPRUN_STD_UNARY(Log, log)
DPRUN_STD_UNARY(Floor, floor)
DPRUN_STD_UNARY(Ceil, ceil)
DPRUN_STD_UNARY(Sin, sin)
DPRUN_STD_UNARY(Cos, cos)
DPRUN_STD_UNARY(Tan, tan)
DPRUN_STD_UNARY(Asin, asin)
DPRUN_STD_UNARY(Acos, acos)
DPRUN_STD_UNARY(Atan, atan)
DPRUN_STD_UNARY(Sinh, sinh)
DPRUN_STD_UNARY(Cosh, cosh)
DPRUN_STD_UNARY(Asinh, asinh)
DPRUN_STD_UNARY(Acosh, acosh)
DPRUN_STD_UNARY(Atanh, atanh)
#undef DPRUN_STD_UNARY

struct Exp {
  template <class T>
  DPRUN_HOST_DEVICE T operator()(T x) const {
    // Exact down to denormals, which fast_expf clamps away. On the host float32 is rounded
    // from double (correctly rounded, and vectorised); a GPU and double use their library's.
#if !defined(__CUDA_ARCH__)
    if constexpr (std::is_same_v<T, float>) return exp_rounded_from_double(x);
#endif
    return std::exp(x);
  }
};

/// erf. For float32 a vectorisable approximation, within 8 ulp and 4.5e-7 of the exact value
/// (glibc's erff takes a data-dependent branch per element and is 2-4x slower): x P(x^2)
/// below |x| = 1 (Cephes erff, 2.5 ulp, relative accuracy down to the smallest x), then the
/// rational x P(x^2) / Q(x^2) of Eigen and XLA with x clamped to [-4, 4], beyond which erf
/// rounds to +-1.
struct Erf {
  template <class T>
  DPRUN_HOST_DEVICE T operator()(T x) const {
    if constexpr (std::is_same_v<T, float>) {
      const float z = x * x;
      float s = 7.853861353153693e-5f;
      s = s * z - 8.010193625184903e-4f;
      s = s * z + 5.188327685732524e-3f;
      s = s * z - 2.685381193529856e-2f;
      s = s * z + 1.128358514861418e-1f;
      s = s * z - 3.761262582423300e-1f;
      s = s * z + 1.128379165726710e+0f;
      const float c = select(x > 4.0f, 4.0f, select(x < -4.0f, -4.0f, x));  // NaN stays
      const float c2 = c * c;
      float p = -2.72614225801306e-10f;
      p = p * c2 + 2.77068142495902e-08f;
      p = p * c2 - 2.10102402082508e-06f;
      p = p * c2 - 5.69250639462346e-05f;
      p = p * c2 - 7.34990630326855e-04f;
      p = p * c2 - 2.95459980854025e-03f;
      p = p * c2 - 1.60960333262415e-02f;
      float q = -1.45660718464996e-05f;
      q = q * c2 - 2.13374055278905e-04f;
      q = q * c2 - 1.68282697438203e-03f;
      q = q * c2 - 7.37332916720468e-03f;
      q = q * c2 - 1.42647390514189e-02f;
      return select(std::fabs(x) < 1.0f, x * s, c * p / q);
    } else {
      return std::erf(x);
    }
  }
};

/// Round half to even (the default floating-point rounding mode).
struct Round {
  template <class T>
  DPRUN_HOST_DEVICE T operator()(T x) const {
    return std::nearbyint(x);
  }
};

struct Tanh {
  template <class T>
  DPRUN_HOST_DEVICE T operator()(T x) const {
    if constexpr (std::is_same_v<T, float>) {
      // Cephes tanhf: an odd polynomial below 0.625, else (1 - e) / (1 + e) with
      // e = exp(-2|x|), which cannot overflow. Both are computed so the loop vectorises.
      const float ax = std::fabs(x);
      const float s = x * x;
      float p = -5.70498872745e-3f;
      p = p * s + 2.06390887954e-2f;
      p = p * s - 5.37397155531e-2f;
      p = p * s + 1.33314422036e-1f;
      p = p * s - 3.33332819422e-1f;
      const float small = p * s * x + x;
      const float e = fast_expf(-2.0f * ax);
      const float t = (1.0f - e) / (1.0f + e);
      const float large = select(x < 0, -t, t);
      return select(ax < 0.625f, small, large);
    } else {
      return std::tanh(x);
    }
  }
};

/// 1 / (1 + exp(-x)): within 4 ulp for float32, and 0 where exp(-x) overflows (x < -88.38,
/// where the exact value is below 5e-39).
struct Sigmoid {
  template <class T>
  DPRUN_HOST_DEVICE T operator()(T x) const {
    if constexpr (std::is_same_v<T, float>) {
      // exp(-x) overflows to +inf rather than to a denormal, so 1 / (1 + e) needs no select
      // between the two halves of the line; NaN, which the clamp maps to 89, is restored.
      return select(x != x, x, 1.0f / (1.0f + clamped_expf(-x)));
    } else {
      const T e = std::exp(-std::fabs(x));  // never overflows
      const T r = T(1) / (T(1) + e);
      return select(x < T(0), e * r, r);
    }
  }
};

/// SiLU (Swish with beta 1), x * sigmoid(x), as x / (1 + exp(-x)) for float32: one division
/// and no product. 0 (with x's sign) for x < -88.38, NaN for NaN and for -inf (as x *
/// sigmoid(x) gives).
struct Silu {
  template <class T>
  DPRUN_HOST_DEVICE T operator()(T x) const {
    if constexpr (std::is_same_v<T, float>)
      return x / (1.0f + clamped_expf(-x));  // NaN and -inf give NaN through x
    else
      return x * Sigmoid{}(x);
  }
};

struct Relu {
  template <class T>
  DPRUN_HOST_DEVICE T operator()(T x) const {
    return x > T(0) ? x : T(0);
  }
};

struct LeakyRelu {
  float alpha = 0.01f;
  template <class T>
  DPRUN_HOST_DEVICE T operator()(T x) const {
    return select(x >= T(0), x, static_cast<T>(alpha) * x);
  }
};

struct Elu {
  float alpha = 1.0f;
  template <class T>
  DPRUN_HOST_DEVICE T operator()(T x) const {
    return x >= T(0) ? x : static_cast<T>(alpha) * std::expm1(x);
  }
};

struct Selu {
  float alpha = 1.67326319217681884765625f;
  float gamma = 1.05070102214813232421875f;
  template <class T>
  DPRUN_HOST_DEVICE T operator()(T x) const {
    return static_cast<T>(gamma) * (x > T(0) ? x : static_cast<T>(alpha) * std::expm1(x));
  }
};

struct Celu {
  float alpha = 1.0f;
  template <class T>
  DPRUN_HOST_DEVICE T operator()(T x) const {
    const T a = static_cast<T>(alpha);
    return x > T(0) ? x : a * std::expm1(x / a);
  }
};

struct HardSigmoid {
  float alpha = 0.2f;
  float beta = 0.5f;
  template <class T>
  DPRUN_HOST_DEVICE T operator()(T x) const {
    const T v = static_cast<T>(alpha) * x + static_cast<T>(beta);
    return v < T(0) ? T(0) : (v > T(1) ? T(1) : v);
  }
};

struct HardSwish {
  template <class T>
  DPRUN_HOST_DEVICE T operator()(T x) const {
    T v = x / T(6) + T(0.5);
    v = select(v > T(0), v, T(0));
    v = select(v < T(1), v, T(1));
    return x * v;
  }
};

struct Softplus {
  template <class T>
  DPRUN_HOST_DEVICE T operator()(T x) const {
    // log(1 + e^x) = max(x, 0) + log1p(e^-|x|), exact for large |x|.
    const T ax = x < T(0) ? -x : x;
    return (x > T(0) ? x : T(0)) + std::log1p(std::exp(-ax));
  }
};

struct Softsign {
  template <class T>
  DPRUN_HOST_DEVICE T operator()(T x) const {
    return x / (T(1) + (x < T(0) ? -x : x));
  }
};

struct ThresholdedRelu {
  float alpha = 1.0f;
  template <class T>
  DPRUN_HOST_DEVICE T operator()(T x) const {
    return select(x > static_cast<T>(alpha), x, T(0));
  }
};

struct Mish {
  template <class T>
  DPRUN_HOST_DEVICE T operator()(T x) const {
    return x * std::tanh(Softplus{}(x));
  }
};

/// Gelu with the exact erf form (approximate = "none").
struct Gelu {
  template <class T>
  DPRUN_HOST_DEVICE T operator()(T x) const {
    if constexpr (std::is_same_v<T, float>) {
      // 1 + erf(u) = erfc(-u): erfc(|u|) for negative x, 2 - erfc(|u|) otherwise.
      const float c = fast_erfcf(std::fabs(x) * 0.70710678f);
      return 0.5f * x * select(x < 0.0f, c, 2.0f - c);
    } else {
      return T(0.5) * x * std::erfc(-x * static_cast<T>(0.7071067811865476));
    }
  }
};

/// The erf form of Gelu as exporters write it before Gelu-20, 0.5 * x * (1 + erf(x / sqrt 2)),
/// evaluated the same way (Erf's rational approximation, 4x cheaper than the erfc of Gelu):
/// the CPU op fusion's Gelu (engine/rewrites/op_fusion.h) computes what the fused nodes did.
struct GeluErfForm {
  template <class T>
  DPRUN_HOST_DEVICE T operator()(T x) const {
    return x * (T(1) + Erf{}(x / static_cast<T>(1.4142135623730951))) * T(0.5);
  }
};

/// Gelu with the tanh approximation (approximate = "tanh").
struct GeluTanh {
  template <class T>
  DPRUN_HOST_DEVICE T operator()(T x) const {
    const T k = static_cast<T>(0.7978845608028654);  // sqrt(2 / pi)
    // 0.5 * (1 + tanh(w)) = sigmoid(2w), which does not cancel for negative w.
    return x * Sigmoid{}(T(2) * k * (x + static_cast<T>(0.044715) * x * x * x));
  }
};

/// Shrink also accepts integers; they compute in double and convert back.
struct Shrink {
  float lambd = 0.5f;
  float bias = 0.0f;
  template <class T>
  DPRUN_HOST_DEVICE T operator()(T x) const {
    using C = std::conditional_t<std::is_floating_point_v<T>, T, double>;
    const C v = static_cast<C>(x);
    const C l = static_cast<C>(lambd), b = static_cast<C>(bias);
    return static_cast<T>(v < -l ? v + b : (v > l ? v - b : C(0)));
  }
};

struct IsNaN {
  template <class T>
  DPRUN_HOST_DEVICE bool operator()(T x) const {
    return x != x;
  }
};

struct IsInf {
  bool detect_positive = true;
  bool detect_negative = true;
  template <class T>
  DPRUN_HOST_DEVICE bool operator()(T x) const {
    // INFINITY rather than numeric_limits: nvcc refuses constexpr host functions in device
    // code unless built with --expt-relaxed-constexpr.
    const T inf = static_cast<T>(INFINITY);
    return (detect_positive && x == inf) || (detect_negative && x == -inf);
  }
};

struct Not {
  DPRUN_HOST_DEVICE bool operator()(bool x) const { return !x; }
};

struct BitwiseNot {
  template <class T>
  DPRUN_HOST_DEVICE T operator()(T x) const {
    return static_cast<T>(~x);
  }
};

}  // namespace dprun::math
