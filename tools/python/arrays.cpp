#include "tools/python/arrays.h"

#include <pybind11/numpy.h>

#include <cstring>
#include <memory>

#include "engine/half.h"
#include "tools/python/errors.h"

namespace py = pybind11;

namespace dprun::python {

namespace {

// Host memory seen through a Python buffer: the buffer (and so its object) is held until the
// last tensor over it lets go, and released with the GIL, from whichever thread that is.
class BufferStorage final : public Storage {
 public:
  BufferStorage(Py_buffer view, size_t bytes)
      : Storage(view.buf, bytes, Device::cpu()), view_(view) {}
  ~BufferStorage() {
    if (!Py_IsInitialized()) return;  // the interpreter is gone, and its objects with it
    py::gil_scoped_acquire gil;
    PyBuffer_Release(&view_);
  }

 private:
  Py_buffer view_;
};

// A buffer released on scope exit unless handed to a BufferStorage.
struct HeldBuffer {
  Py_buffer view{};
  bool held = false;
  ~HeldBuffer() {
    if (held) PyBuffer_Release(&view);
  }
};

// The dtype of a buffer's struct-module format ("<f", "f", "=q", ...) with `itemsize`.
std::optional<DType> dtype_of_format(const char* format, Py_ssize_t itemsize) {
  std::string f = format ? format : "B";
  if (!f.empty() && (f[0] == '<' || f[0] == '=' || f[0] == '@' || f[0] == '|')) f.erase(0, 1);
  if (f.size() != 1) return std::nullopt;
  const bool wide = itemsize == 8;
  switch (f[0]) {
    case 'f':
      return DType::Float32;
    case 'd':
      return DType::Float64;
    case 'e':
      return DType::Float16;
    case 'b':
      return DType::Int8;
    case 'B':
      return DType::UInt8;
    case 'h':
      return DType::Int16;
    case 'H':
      return DType::UInt16;
    case 'i':
      return DType::Int32;
    case 'I':
      return DType::UInt32;
    case 'l':
      return wide ? DType::Int64 : DType::Int32;
    case 'L':
      return wide ? DType::UInt64 : DType::UInt32;
    case 'q':
      return DType::Int64;
    case 'Q':
      return DType::UInt64;
    case '?':
      return DType::Bool;
    default:
      return std::nullopt;
  }
}

// What the object is, for messages: "a list", "a str", "an int".
std::string kind_of(const py::handle& object) {
  const std::string type = py::str(py::type::handle_of(object).attr("__name__"));
  const bool vowel = !type.empty() && std::strchr("aeiouAEIOU", type[0]) != nullptr;
  return std::string(vowel ? "an " : "a ") + type;
}

// `object`, or an object with the buffer protocol that views the same memory: numpy.from_dlpack
// for __dlpack__, numpy.asarray for __array__.
py::object with_buffer(const py::handle& object, const std::string& name) {
  if (PyObject_CheckBuffer(object.ptr())) return py::reinterpret_borrow<py::object>(object);
  const char* how = nullptr;
  try {
    py::module_ numpy = py::module_::import("numpy");
    if (py::hasattr(object, "__dlpack__") && py::hasattr(numpy, "from_dlpack")) {
      how = "__dlpack__";
      try {
        return numpy.attr("from_dlpack")(object);
      } catch (const py::error_already_set&) {
        if (!py::hasattr(object, "__array__")) throw;  // else try __array__
      }
    }
    if (py::hasattr(object, "__array__")) {
      how = "__array__";
      return numpy.attr("asarray")(object);
    }
  } catch (const py::error_already_set& e) {
    raise("input '" + name + "': " + kind_of(object) + " whose " + how + " failed: " + one_line(e));
  }
  raise("input '" + name + "': " + kind_of(object) +
        " is not an array; give a NumPy array, a CPU torch tensor or any object with the buffer "
        "protocol, __array__ or __dlpack__");
}

}  // namespace

Tensor tensor_from_python(const py::handle& object, const std::string& name,
                          const TensorType& declared) {
  if (object.is_none()) raise("input '" + name + "' is missing");
  const py::object source = with_buffer(object, name);
  auto held = std::make_unique<HeldBuffer>();
  if (PyObject_GetBuffer(source.ptr(), &held->view, PyBUF_RECORDS_RO) != 0) {
    py::error_already_set e;
    raise("input '" + name + "': " + kind_of(object) + " gives no readable buffer: " + one_line(e));
  }
  held->held = true;
  const Py_buffer& view = held->view;
  std::optional<DType> dtype = dtype_of_format(view.format, view.itemsize);
  if (!dtype || dtype_size(*dtype) != static_cast<size_t>(view.itemsize))
    raise("input '" + name + "': elements of format '" +
          std::string(view.format ? view.format : "") +
          "' have no dprun dtype (give a numeric or bool array in native byte order)");
  if (*dtype == DType::UInt16 && declared.dtype == DType::BFloat16) dtype = DType::BFloat16;
  Shape shape;
  for (int d = 0; d < view.ndim; ++d) shape.push_back(view.shape[d]);
  const size_t bytes = static_cast<size_t>(view.len);

  if (PyBuffer_IsContiguous(&view, 'C')) {
    held->held = false;  // the storage releases it
    auto storage = std::make_shared<BufferStorage>(view, bytes);
    return Tensor::from_storage(std::move(storage), std::move(shape), *dtype);
  }
  Tensor copy = Tensor::empty(std::move(shape), *dtype);
  if (PyBuffer_ToContiguous(copy.raw_data(), &view, view.len, 'C') != 0) {
    py::error_already_set e;
    raise("input '" + name + "': its buffer could not be read: " + one_line(e));
  }
  return copy;
}

namespace {
// A capsule that owns a heap copy of a tensor handle, so that the array keeps its storage.
py::capsule owner_of(const Tensor& tensor) {
  auto* kept = new Tensor(tensor);
  return py::capsule(kept, [](void* p) { delete static_cast<Tensor*>(p); });
}

std::vector<py::ssize_t> dims_of(const Tensor& t) {
  return std::vector<py::ssize_t>(t.shape().begin(), t.shape().end());
}

template <class T>
py::object array_over(const Tensor& t) {
  const T* data = static_cast<const T*>(t.raw_data());
  return py::array_t<T>(dims_of(t), data, owner_of(t));
}
}  // namespace

py::object numpy_from_tensor(const Tensor& tensor) {
  const Tensor t = tensor.device().type == DeviceType::CPU ? tensor : tensor.to(Device::cpu());
  switch (t.dtype()) {
    case DType::Float32:
      return array_over<float>(t);
    case DType::Float64:
      return array_over<double>(t);
    case DType::Int8:
      return array_over<int8_t>(t);
    case DType::Int16:
      return array_over<int16_t>(t);
    case DType::Int32:
      return array_over<int32_t>(t);
    case DType::Int64:
      return array_over<int64_t>(t);
    case DType::UInt8:
      return array_over<uint8_t>(t);
    case DType::UInt16:
      return array_over<uint16_t>(t);
    case DType::UInt32:
      return array_over<uint32_t>(t);
    case DType::UInt64:
      return array_over<uint64_t>(t);
    case DType::Bool:
      return array_over<bool>(t);
    case DType::Float16: {
      py::array out(py::dtype("float16"), dims_of(t), t.raw_data(), owner_of(t));
      return out;
    }
    case DType::BFloat16: {
      py::array_t<float> out(dims_of(t));
      const BFloat16* in = static_cast<const BFloat16*>(t.raw_data());
      float* o = out.mutable_data();
      for (int64_t i = 0; i < t.numel(); ++i) o[i] = static_cast<float>(in[i]);
      return out;
    }
    case DType::String: {
      py::list items;
      const std::string* in = static_cast<const std::string*>(t.raw_data());
      for (int64_t i = 0; i < t.numel(); ++i) items.append(py::str(in[i]));
      py::module_ numpy = py::module_::import("numpy");
      py::object array = numpy.attr("array")(items, py::arg("dtype") = numpy.attr("object_"));
      return array.attr("reshape")(py::tuple(py::cast(dims_of(t))));
    }
    default:
      raise("an output of dtype " + std::string(dtype_name(t.dtype())) + " has no NumPy form");
  }
}

}  // namespace dprun::python
