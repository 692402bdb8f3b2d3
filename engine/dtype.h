#pragma once
// Element types. The numeric values equal ONNX TensorProto::DataType so the loader converts
// by value, without this header knowing about protobuf.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>

#include "engine/error.h"
#include "engine/half.h"

namespace dprun {

enum class DType : int32_t {
  Undefined = 0,
  Float32 = 1,
  UInt8 = 2,
  Int8 = 3,
  UInt16 = 4,
  Int16 = 5,
  Int32 = 6,
  Int64 = 7,
  String = 8,
  Bool = 9,
  Float16 = 10,
  Float64 = 11,
  UInt32 = 12,
  UInt64 = 13,
  BFloat16 = 16,
};

/// Bytes per element; throws for Undefined and String (string tensors hold std::string
/// objects, which cannot be moved as raw bytes).
size_t dtype_size(DType t);
/// Lower-case numpy-style name: "float32", "int64", "bool", ...
std::string_view dtype_name(DType t);
/// Parses dtype_name's spelling; throws Error on an unknown name.
DType dtype_from_name(std::string_view name);
bool is_floating(DType t);
/// Float16 and bfloat16: floats stored in 16 bits and computed in float.
bool is_16bit_float(DType t);
bool is_integral(DType t);  // signed or unsigned integers, not bool
bool is_signed(DType t);    // floating types and signed integers
/// True for the fixed-size dtypes (everything but Undefined and String). A Tensor can also
/// hold String elements (std::string, CPU only); raw-byte kernels must reject those.
bool is_storable(DType t);

template <class T>
struct DTypeOf;
#define DPRUN_DTYPE_OF(CppType, Enum)           \
  template <>                                   \
  struct DTypeOf<CppType> {                     \
    static constexpr DType value = DType::Enum; \
  };
DPRUN_DTYPE_OF(float, Float32)
DPRUN_DTYPE_OF(double, Float64)
DPRUN_DTYPE_OF(Float16, Float16)
DPRUN_DTYPE_OF(BFloat16, BFloat16)
DPRUN_DTYPE_OF(int8_t, Int8)
DPRUN_DTYPE_OF(int16_t, Int16)
DPRUN_DTYPE_OF(int32_t, Int32)
DPRUN_DTYPE_OF(int64_t, Int64)
DPRUN_DTYPE_OF(uint8_t, UInt8)
DPRUN_DTYPE_OF(uint16_t, UInt16)
DPRUN_DTYPE_OF(uint32_t, UInt32)
DPRUN_DTYPE_OF(uint64_t, UInt64)
DPRUN_DTYPE_OF(bool, Bool)
DPRUN_DTYPE_OF(std::string, String)
#undef DPRUN_DTYPE_OF

/// The DType of a C++ element type, e.g. dtype_of<float>() == DType::Float32.
template <class T>
constexpr DType dtype_of() {
  return DTypeOf<T>::value;
}

/// Calls f(T{}) with T the C++ type of `t`, for every storable dtype. Throws for others.
template <class F>
decltype(auto) visit_dtype(DType t, F&& f) {
  switch (t) {
    case DType::Float32:
      return f(float{});
    case DType::Float64:
      return f(double{});
    case DType::Float16:
      return f(Float16{});
    case DType::BFloat16:
      return f(BFloat16{});
    case DType::Int8:
      return f(int8_t{});
    case DType::Int16:
      return f(int16_t{});
    case DType::Int32:
      return f(int32_t{});
    case DType::Int64:
      return f(int64_t{});
    case DType::UInt8:
      return f(uint8_t{});
    case DType::UInt16:
      return f(uint16_t{});
    case DType::UInt32:
      return f(uint32_t{});
    case DType::UInt64:
      return f(uint64_t{});
    case DType::Bool:
      return f(bool{});
    default:
      fail("dtype ", dtype_name(t), " is not supported here");
  }
}

/// Calls f(T{}) with T the one of the listed C++ types whose dtype is `t`; throws Error naming
/// the dtype when it is none of them. E.g. visit_dtype_among<float, double>(t, f).
template <class T, class... Rest, class F>
decltype(auto) visit_dtype_among(DType t, F&& f) {
  if (t == dtype_of<T>()) return f(T{});
  if constexpr (sizeof...(Rest) > 0)
    return visit_dtype_among<Rest...>(t, std::forward<F>(f));
  else
    fail("dtype ", dtype_name(t), " is not supported by this operation");
}

/// Like visit_dtype, restricted to the arithmetic types kernels compute in natively
/// (float, double, and the integer types). 16-bit floats and bool are rejected.
template <class F>
decltype(auto) visit_numeric_dtype(DType t, F&& f) {
  return visit_dtype_among<float, double, int8_t, int16_t, int32_t, int64_t, uint8_t, uint16_t,
                           uint32_t, uint64_t>(t, std::forward<F>(f));
}

}  // namespace dprun
