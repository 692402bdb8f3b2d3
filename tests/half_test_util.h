#pragma once
// Shared pieces of the float16 and bfloat16 tests: typed values, exact small values, one
// rounding, and the dtype x device parameters the device tests run over.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <tuple>
#include <utility>

#include "engine/half.h"
#include "engine/tensor.h"
#include "graph_test_util.h"

namespace dprun::testing {

/// A tensor type of `dtype` and fully known `shape`.
inline TensorType typed(DType dtype, const Shape& shape) {
  TensorType t = float32_type(shape);
  t.dtype = dtype;
  return t;
}

/// `v` rounded once to `dtype` (float16 or bfloat16), to nearest even, read back as a double.
inline double rounded_16bit(float v, DType dtype) {
  return dtype == DType::Float16 ? static_cast<float>(Float16(v)) : static_cast<float>(BFloat16(v));
}

/// The distance from `v`, a float16 or bfloat16 value, to the next one away from zero: one
/// step of the type's rounding at v's magnitude (the smallest subnormal step below the normals).
inline double step_16bit(double v, DType dtype) {
  const int mantissa_bits = dtype == DType::Float16 ? 10 : 7;
  const int min_exponent = dtype == DType::Float16 ? -14 : -126;
  const int exponent = v == 0 ? min_exponent : std::max(std::ilogb(v), min_exponent);
  return std::ldexp(1.0, exponent - mantissa_bits);
}

/// Multiples of 1/8 in [-15/8, 15/8] as float32 (`wide`) and as `dtype` (`narrow`), the same
/// values exactly: products and short sums of them are exact in float32.
struct Eighths {
  Tensor wide, narrow;
};
inline Eighths eighths(DType dtype, const Shape& shape, unsigned seed) {
  Eighths e{Tensor::empty(shape, DType::Float32), Tensor::empty(shape, dtype)};
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> dist(-15, 15);
  for (int64_t i = 0; i < e.wide.numel(); ++i) {
    const float v = static_cast<float>(dist(rng)) / 8.f;
    e.wide.data<float>()[i] = v;
    if (dtype == DType::Float16)
      e.narrow.data<Float16>()[i] = Float16(v);
    else
      e.narrow.data<BFloat16>()[i] = BFloat16(v);
  }
  return e;
}

/// The parameters of a test over both 16-bit dtypes on cpu, sim and cuda, and their names
/// ("float16_cpu"); the test skips a device type it cannot use.
using HalfOnDevice = std::tuple<DType, DeviceType>;
inline auto half_on_devices() {
  return ::testing::Combine(::testing::Values(DType::Float16, DType::BFloat16),
                            ::testing::Values(DeviceType::CPU, DeviceType::Sim, DeviceType::CUDA));
}
inline std::string half_on_device_name(const ::testing::TestParamInfo<HalfOnDevice>& info) {
  return std::string(dtype_name(std::get<0>(info.param))) + "_" +
         std::string(device_type_name(std::get<1>(info.param)));
}

}  // namespace dprun::testing
