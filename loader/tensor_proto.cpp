#include "loader/tensor_proto.h"

#include <cstring>

namespace dprun {

namespace {

// Copies the tensor's values from a protobuf repeated field, converting each with `convert`;
// tensor_from_proto has checked that the field holds exactly that many. The typed fields of
// TensorProto store narrow types widened (int32_data holds int8..uint16, bool and the bits of
// float16/bfloat16).
template <class T, class Field, class Convert>
void copy_field(const Field& field, Tensor& out, Convert convert) {
  T* dst = out.data<T>();
  for (int64_t i = 0; i < out.numel(); ++i) dst[i] = convert(field.Get(static_cast<int>(i)));
}

// The elements of `shape`, failing when the count overflows.
int64_t checked_numel(const Shape& shape, const std::string& name) {
  int64_t n = 1;
  for (int64_t d : shape)
    DPRUN_CHECK(!__builtin_mul_overflow(n, d, &n), "tensor '", name, "' of shape ",
                shape_to_string(shape), " has more elements than fit in 64 bits");
  return n;
}

// How many values the typed field that holds `dtype` carries.
int64_t typed_values(const onnx::TensorProto& proto, DType dtype) {
  switch (dtype) {
    case DType::Float32:
      return proto.float_data_size();
    case DType::Float64:
      return proto.double_data_size();
    case DType::Int64:
      return proto.int64_data_size();
    case DType::UInt64:
    case DType::UInt32:
      return proto.uint64_data_size();
    case DType::String:
      return proto.string_data_size();
    default:
      return proto.int32_data_size();
  }
}

}  // namespace

Tensor tensor_from_proto(const onnx::TensorProto& proto, const ExternalDataFolders& folders) {
  const std::string& name = proto.name();
  DType dtype = static_cast<DType>(proto.data_type());
  DPRUN_CHECK(is_storable(dtype) || dtype == DType::String, "tensor '", name, "' has dtype ",
              std::to_string(proto.data_type()), ", which is not supported");
  Shape shape(proto.dims().begin(), proto.dims().end());
  for (int64_t d : shape) DPRUN_CHECK(d >= 0, "tensor '", name, "' has a negative dimension");
  // The data must be in the model before memory is taken for it: a hostile shape must not
  // allocate what the file does not hold.
  const int64_t numel = checked_numel(shape, name);
  const bool external = proto.data_location() == onnx::TensorProto::EXTERNAL;
  // Strings are always read from string_data; other types from raw or external bytes when
  // the model gives them.
  const bool typed_field = dtype == DType::String || (!external && !proto.has_raw_data());
  if (typed_field)
    DPRUN_CHECK(typed_values(proto, dtype) == numel, "initializer '", name, "' has ",
                typed_values(proto, dtype), " values for shape ", shape_to_string(shape));
  if (dtype == DType::String) {
    Tensor out = Tensor::empty(shape, dtype);
    copy_field<std::string>(proto.string_data(), out, [](const std::string& v) { return v; });
    return out;
  }
  size_t bytes = 0;
  DPRUN_CHECK(!__builtin_mul_overflow(static_cast<size_t>(numel), dtype_size(dtype), &bytes),
              "tensor '", name, "' of shape ", shape_to_string(shape),
              " has more bytes than fit in 64 bits");
  if (external) {
    const ExternalData data(proto, folders, bytes);  // checks the file before memory is taken
    Tensor out = Tensor::empty(shape, dtype);
    data.read_into(out.raw_data());
    return out;
  }
  if (proto.has_raw_data()) {
    DPRUN_CHECK(proto.raw_data().size() == bytes, "tensor '", name, "' has ",
                proto.raw_data().size(), " bytes of raw data but shape ", shape_to_string(shape),
                " of ", dtype_name(dtype), " needs ", bytes);
    Tensor out = Tensor::empty(shape, dtype);
    std::memcpy(out.raw_data(), proto.raw_data().data(), bytes);
    return out;
  }
  Tensor out = Tensor::empty(shape, dtype);
  auto same = [](auto v) { return v; };
  switch (dtype) {
    case DType::Float32:
      copy_field<float>(proto.float_data(), out, same);
      break;
    case DType::Float64:
      copy_field<double>(proto.double_data(), out, same);
      break;
    case DType::Int64:
      copy_field<int64_t>(proto.int64_data(), out, same);
      break;
    case DType::UInt64:
      copy_field<uint64_t>(proto.uint64_data(), out, same);
      break;
    case DType::UInt32:
      copy_field<uint32_t>(proto.uint64_data(), out,
                           [](uint64_t v) { return static_cast<uint32_t>(v); });
      break;
    case DType::Int32:
      copy_field<int32_t>(proto.int32_data(), out, same);
      break;
    case DType::Int16:
      copy_field<int16_t>(proto.int32_data(), out,
                          [](int32_t v) { return static_cast<int16_t>(v); });
      break;
    case DType::Int8:
      copy_field<int8_t>(proto.int32_data(), out, [](int32_t v) { return static_cast<int8_t>(v); });
      break;
    case DType::UInt16:
      copy_field<uint16_t>(proto.int32_data(), out,
                           [](int32_t v) { return static_cast<uint16_t>(v); });
      break;
    case DType::UInt8:
      copy_field<uint8_t>(proto.int32_data(), out,
                          [](int32_t v) { return static_cast<uint8_t>(v); });
      break;
    case DType::Bool:
      copy_field<bool>(proto.int32_data(), out, [](int32_t v) { return v != 0; });
      break;
    case DType::Float16:
      copy_field<Float16>(proto.int32_data(), out, [](int32_t v) {
        Float16 h;
        h.bits = static_cast<uint16_t>(v);
        return h;
      });
      break;
    case DType::BFloat16:
      copy_field<BFloat16>(proto.int32_data(), out, [](int32_t v) {
        BFloat16 h;
        h.bits = static_cast<uint16_t>(v);
        return h;
      });
      break;
    default:
      fail("tensor '", name, "' has an unsupported dtype");
  }
  return out;
}

void tensor_to_proto(const Tensor& tensor, const std::string& name, onnx::TensorProto* proto) {
  Tensor host = tensor.to(Device::cpu());
  proto->Clear();
  proto->set_name(name);
  proto->set_data_type(static_cast<int32_t>(host.dtype()));
  for (int64_t d : host.shape()) proto->add_dims(d);
  if (host.dtype() == DType::String) {
    const std::string* values = host.data<std::string>();
    for (int64_t i = 0; i < host.numel(); ++i) proto->add_string_data(values[i]);
    return;
  }
  proto->set_raw_data(host.raw_data(), host.nbytes());
}

}  // namespace dprun
