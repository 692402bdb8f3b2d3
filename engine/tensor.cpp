#include "engine/tensor.h"

#include <algorithm>
#include <cstring>
#include <sstream>

#include "engine/backend.h"
#include "engine/stream_order.h"

namespace dprun {

namespace {
// Bytes one element occupies in storage (String tensors store std::string objects).
size_t element_bytes(DType t) {
  return t == DType::String ? sizeof(std::string) : dtype_size(t);
}

// Copies `count` strings; String tensors are host-only.
void copy_strings(std::string* dst, const std::string* src, int64_t count) {
  std::copy(src, src + count, dst);
}
}  // namespace

Storage::Storage(size_t bytes, std::shared_ptr<Allocator> allocator)
    : bytes_(bytes), device_(allocator->device()), allocator_(std::move(allocator)) {
  data_ = allocator_->allocate(bytes == 0 ? 1 : bytes);
}

Storage::Storage(void* external, size_t bytes, Device device)
    : data_(external), bytes_(bytes), device_(device) {}

Storage::Storage(std::shared_ptr<Storage> base, Device device)
    : data_(base->data()), bytes_(base->bytes()), device_(device), base_(std::move(base)) {}

Storage::Storage(size_t count, DType string_tag) : device_(Device::cpu()), strings_(count) {
  DPRUN_CHECK(string_tag == DType::String, "Storage of objects is only for strings");
  data_ = strings_.data();
  bytes_ = count * sizeof(std::string);
}

Storage::~Storage() {
  if (device_.type != DeviceType::CPU) forget_ready_event(this);
  if (allocator_) allocator_->deallocate(data_, bytes_ == 0 ? 1 : bytes_);
}

Tensor Tensor::empty(Shape shape, DType dtype, Device device) {
  DPRUN_CHECK(is_storable(dtype) || dtype == DType::String, "cannot create a tensor of dtype ",
              dtype_name(dtype));
  Tensor t;
  t.numel_ = shape_numel(shape);
  t.shape_ = std::move(shape);
  t.dtype_ = dtype;
  if (dtype == DType::String) {
    DPRUN_CHECK(device.type == DeviceType::CPU, "string tensors cannot live on ",
                device.to_string());
    t.storage_ = std::make_shared<Storage>(static_cast<size_t>(t.numel_), DType::String);
    return t;
  }
  t.storage_ = std::make_shared<Storage>(t.nbytes(), backend_for(device).allocator(device));
  return t;
}

Tensor Tensor::from_storage(std::shared_ptr<Storage> storage, Shape shape, DType dtype) {
  DPRUN_CHECK(storage != nullptr, "from_storage: no storage given");
  DPRUN_CHECK(is_storable(dtype), "from_storage: cannot view memory as dtype ", dtype_name(dtype));
  Tensor t;
  t.numel_ = shape_numel(shape);
  t.shape_ = std::move(shape);
  t.dtype_ = dtype;
  DPRUN_CHECK(t.nbytes() <= storage->bytes(), "from_storage: ", dtype_name(dtype),
              shape_to_string(t.shape_), " needs ", t.nbytes(), " bytes but the storage holds ",
              storage->bytes());
  t.storage_ = std::move(storage);
  return t;
}

Tensor Tensor::zeros(Shape shape, DType dtype, Device device) {
  if (dtype == DType::String) return empty(std::move(shape), dtype, device);  // ""s
  Tensor t = empty(std::move(shape), dtype, Device::cpu());
  std::memset(t.raw_data(), 0, t.nbytes());
  return device.type == DeviceType::CPU ? t : t.to(device);
}

int64_t Tensor::dim(int64_t axis) const {
  return shape_[normalize_axis(axis, rank())];
}

Device Tensor::device() const {
  return storage_ ? storage_->device() : Device::cpu();
}

void* Tensor::raw_data() {
  DPRUN_CHECK(defined(), "use of an undefined tensor");
  return static_cast<char*>(storage_->data()) + offset_;
}

const void* Tensor::raw_data() const {
  DPRUN_CHECK(defined(), "use of an undefined tensor");
  return static_cast<const char*>(storage_->data()) + offset_;
}

void Tensor::check_type(DType requested) const {
  if (requested != dtype_)
    fail("tensor holds ", dtype_name(dtype_), " but was read as ", dtype_name(requested));
}

Tensor Tensor::reshape(Shape shape) const {
  int64_t known = 1, infer = -1;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == -1) {
      DPRUN_CHECK(infer < 0, "reshape: more than one -1 in ", shape_to_string(shape));
      infer = static_cast<int64_t>(i);
    } else {
      known *= shape[i];
    }
  }
  if (infer >= 0) {
    DPRUN_CHECK(known != 0 && numel_ % known == 0, "reshape: cannot infer -1 in ",
                shape_to_string(shape), " from ", numel_, " elements");
    shape[infer] = numel_ / known;
  }
  DPRUN_CHECK(shape_numel(shape) == numel_, "reshape: shape ", shape_to_string(shape),
              " does not hold ", numel_, " elements of ", shape_to_string(shape_));
  Tensor t = *this;
  t.shape_ = std::move(shape);
  return t;
}

Tensor Tensor::narrow(int64_t axis, int64_t start, int64_t length) const {
  axis = normalize_axis(axis, rank());
  DPRUN_CHECK(start >= 0 && length >= 0 && start + length <= shape_[axis], "narrow: rows [", start,
              ", ", start + length, ") out of range for dimension ", axis, " of size ",
              shape_[axis]);
  int64_t outer = 1, inner = 1;
  for (int64_t i = 0; i < axis; ++i) outer *= shape_[i];
  for (int64_t i = axis + 1; i < rank(); ++i) inner *= shape_[i];
  Shape out_shape = shape_;
  out_shape[axis] = length;
  size_t elem = element_bytes(dtype_);
  if (outer == 1) {
    Tensor t = *this;
    t.offset_ += static_cast<size_t>(start * inner) * elem;
    t.shape_ = out_shape;
    t.numel_ = shape_numel(out_shape);
    return t;
  }
  Tensor out = empty(out_shape, dtype_, device());
  size_t row_bytes = static_cast<size_t>(length * inner) * elem;
  size_t src_stride = static_cast<size_t>(shape_[axis] * inner) * elem;
  const char* src = static_cast<const char*>(raw_data()) + start * inner * elem;
  char* dst = static_cast<char*>(out.raw_data());
  if (dtype_ == DType::String) {
    for (int64_t o = 0; o < outer; ++o)
      copy_strings(reinterpret_cast<std::string*>(dst + o * row_bytes),
                   reinterpret_cast<const std::string*>(src + o * src_stride), length * inner);
    return out;
  }
  CopyOrder order(out, *this);
  for (int64_t o = 0; o < outer; ++o)
    copy_bytes(dst + o * row_bytes, out.device(), src + o * src_stride, device(), row_bytes);
  order.done();
  return out;
}

Tensor Tensor::pin_memory(Device device) const {
  if (!defined() || dtype_ == DType::String || this->device().type != DeviceType::CPU) return *this;
  std::shared_ptr<Allocator> pinned = backend_for(device).pinned_host_allocator();
  if (!pinned) return *this;
  Tensor out = *this;  // the shape and dtype; new storage below
  out.storage_ = std::make_shared<Storage>(nbytes(), std::move(pinned));
  out.offset_ = 0;
  std::memcpy(out.raw_data(), raw_data(), out.nbytes());
  return out;
}

Tensor Tensor::to_unless_string(Device device) const {
  return dtype_ == DType::String ? *this : to(device);
}

Tensor Tensor::to(Device device, bool copy) const {
  if (!copy && device == this->device()) return *this;
  Tensor out = empty(shape_, dtype_, device);
  if (dtype_ == DType::String)
    copy_strings(out.data<std::string>(), data<std::string>(), numel_);
  else {
    CopyOrder order(out, *this);
    copy_bytes(out.raw_data(), device, raw_data(), this->device(), nbytes());
    order.done();
  }
  return out;
}

Tensor Tensor::alias_on(Device device) const {
  DPRUN_CHECK(defined(), "use of an undefined tensor");
  if (device == this->device()) return *this;
  DPRUN_CHECK(device.type == DeviceType::CPU && this->device().type == DeviceType::CPU,
              "alias_on: ", describe(), " cannot be seen from ", device.to_string(),
              " without a copy; only CPU devices share memory");
  Tensor alias = *this;
  alias.storage_ = std::make_shared<Storage>(storage_, device);
  return alias;
}

Tensor Tensor::clone() const {
  return to(device(), true);
}

void Tensor::copy_from(const Tensor& src) {
  DPRUN_CHECK(src.dtype_ == dtype_ && src.numel_ == numel_, "copy_from: ", src.describe(),
              " does not fit ", describe());
  if (src.raw_data() == raw_data()) return;
  if (dtype_ == DType::String)
    return copy_strings(data<std::string>(), src.data<std::string>(), numel_);
  CopyOrder order(*this, src);
  copy_bytes(raw_data(), device(), src.raw_data(), src.device(), nbytes());
  order.done();
}

double Tensor::item_as_double(int64_t i) const {
  DPRUN_CHECK(device().type == DeviceType::CPU, "item_as_double needs a CPU tensor");
  DPRUN_CHECK(i >= 0 && i < numel_, "element ", i, " out of range for ", describe());
  return visit_dtype(dtype_, [&](auto zero) -> double {
    using T = decltype(zero);
    T v = static_cast<const T*>(raw_data())[i];
    if constexpr (std::is_same_v<T, Float16> || std::is_same_v<T, BFloat16>)
      return static_cast<double>(static_cast<float>(v));
    else
      return static_cast<double>(v);
  });
}

std::string Tensor::describe() const {
  if (!defined()) return "undefined tensor";
  std::ostringstream out;
  out << dtype_name(dtype_) << shape_to_string(shape_) << " on " << device().to_string();
  return out.str();
}

Tensor concat(const std::vector<Tensor>& parts, int64_t axis, Device device) {
  DPRUN_CHECK(!parts.empty(), "concat of no tensors");
  const Tensor& first = parts.front();
  axis = normalize_axis(axis, first.rank());
  Shape out_shape = first.shape();
  out_shape[axis] = 0;
  for (size_t p = 0; p < parts.size(); ++p) {
    const Tensor& t = parts[p];
    DPRUN_CHECK(t.dtype() == first.dtype(), "concat: part ", p, " is ", dtype_name(t.dtype()),
                ", part 0 is ", dtype_name(first.dtype()));
    DPRUN_CHECK(t.rank() == first.rank(), "concat: part ", p, " has shape ",
                shape_to_string(t.shape()), ", part 0 has ", shape_to_string(first.shape()));
    for (int64_t d = 0; d < first.rank(); ++d)
      DPRUN_CHECK(d == axis || t.shape()[d] == first.shape()[d], "concat: part ", p, " has shape ",
                  shape_to_string(t.shape()), ", part 0 has ", shape_to_string(first.shape()),
                  "; they must agree outside dimension ", axis);
    out_shape[axis] += t.shape()[axis];
  }
  Tensor out = Tensor::empty(out_shape, first.dtype(), device);
  int64_t outer = 1;
  for (int64_t i = 0; i < axis; ++i) outer *= out_shape[i];
  size_t elem = element_bytes(first.dtype());
  size_t out_row = static_cast<size_t>(out.numel() / std::max<int64_t>(outer, 1)) * elem;
  size_t col = 0;
  for (const Tensor& t : parts) {
    CopyOrder order(out, t);
    size_t part_row = static_cast<size_t>(t.numel() / std::max<int64_t>(outer, 1)) * elem;
    for (int64_t o = 0; o < outer; ++o) {
      char* dst = static_cast<char*>(out.raw_data()) + o * out_row + col;
      const char* src = static_cast<const char*>(t.raw_data()) + o * part_row;
      if (first.dtype() == DType::String)
        copy_strings(reinterpret_cast<std::string*>(dst), reinterpret_cast<const std::string*>(src),
                     static_cast<int64_t>(part_row / elem));
      else
        copy_bytes(dst, device, src, t.device(), part_row);
    }
    order.done();
    col += part_row;
  }
  return out;
}

}  // namespace dprun
