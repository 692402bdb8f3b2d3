#include "engine/dtype.h"

#include <array>

namespace dprun {
namespace {
struct DTypeInfo {
  DType type;
  std::string_view name;
  size_t size;
};
constexpr std::array<DTypeInfo, 14> kInfos = {{
    {DType::Float32, "float32", 4},
    {DType::Float64, "float64", 8},
    {DType::Float16, "float16", 2},
    {DType::BFloat16, "bfloat16", 2},
    {DType::Int8, "int8", 1},
    {DType::Int16, "int16", 2},
    {DType::Int32, "int32", 4},
    {DType::Int64, "int64", 8},
    {DType::UInt8, "uint8", 1},
    {DType::UInt16, "uint16", 2},
    {DType::UInt32, "uint32", 4},
    {DType::UInt64, "uint64", 8},
    {DType::Bool, "bool", 1},
    {DType::String, "string", 0},
}};

const DTypeInfo* find_info(DType t) {
  for (const auto& info : kInfos)
    if (info.type == t) return &info;
  return nullptr;
}
}  // namespace

size_t dtype_size(DType t) {
  const DTypeInfo* info = find_info(t);
  if (info == nullptr || info->size == 0)
    fail("dtype ", dtype_name(t), " has no fixed element size");
  return info->size;
}

std::string_view dtype_name(DType t) {
  const DTypeInfo* info = find_info(t);
  return info ? info->name : std::string_view("undefined");
}

DType dtype_from_name(std::string_view name) {
  for (const auto& info : kInfos)
    if (info.name == name) return info.type;
  if (name == "float") return DType::Float32;
  if (name == "double") return DType::Float64;
  fail("unknown dtype '", name, "'");
}

bool is_16bit_float(DType t) {
  return t == DType::Float16 || t == DType::BFloat16;
}

bool is_floating(DType t) {
  return t == DType::Float32 || t == DType::Float64 || t == DType::Float16 || t == DType::BFloat16;
}

bool is_integral(DType t) {
  switch (t) {
    case DType::Int8:
    case DType::Int16:
    case DType::Int32:
    case DType::Int64:
    case DType::UInt8:
    case DType::UInt16:
    case DType::UInt32:
    case DType::UInt64:
      return true;
    default:
      return false;
  }
}

bool is_signed(DType t) {
  return is_floating(t) || t == DType::Int8 || t == DType::Int16 || t == DType::Int32 ||
         t == DType::Int64;
}

bool is_storable(DType t) {
  const DTypeInfo* info = find_info(t);
  return info != nullptr && info->size != 0;
}

}  // namespace dprun
