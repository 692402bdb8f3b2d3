#pragma once
// Tensor: a dense, C-contiguous n-d array on a device. Copying a Tensor shares its storage
// (like torch.Tensor); clone() copies the data. String tensors live on the CPU and hold
// std::string elements; nbytes()/dtype_size() refuse them so byte-moving kernels fail cleanly.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/allocator.h"
#include "engine/device.h"
#include "engine/dtype.h"
#include "engine/shape.h"

namespace dprun {

/// A block of device memory (or, for String tensors, an array of std::string), returned to its
/// allocator when the last owner lets go.
class Storage {
 public:
  Storage(size_t bytes, std::shared_ptr<Allocator> allocator);
  /// Wraps memory owned elsewhere (not freed here); used for zero-copy views of caller data.
  Storage(void* external, size_t bytes, Device device);
  /// `base`'s memory seen from `device`, a device that shares it (CPU devices all share the
  /// host's memory); keeps `base` alive and frees nothing itself.
  Storage(std::shared_ptr<Storage> base, Device device);
  /// Host memory holding `count` std::string objects (the storage of String tensors).
  explicit Storage(size_t count, DType string_tag);
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

  void* data() { return data_; }
  const void* data() const { return data_; }
  size_t bytes() const { return bytes_; }
  Device device() const { return device_; }
  /// False for memory owned elsewhere (the external-memory constructor).
  bool owns_memory() const { return allocator_ != nullptr; }

 private:
  void* data_ = nullptr;
  size_t bytes_ = 0;
  Device device_;
  std::shared_ptr<Allocator> allocator_;  // null for external memory
  std::shared_ptr<Storage> base_;         // the owner of an alias's memory
  std::vector<std::string> strings_;      // String tensors only
};

class Tensor {
 public:
  /// An undefined tensor (defined() is false).
  Tensor() = default;

  /// Uninitialised tensor on `device`, memory from that device's allocator (String tensors:
  /// empty strings, CPU only).
  static Tensor empty(Shape shape, DType dtype, Device device = Device::cpu());
  /// Zero-filled tensor.
  static Tensor zeros(Shape shape, DType dtype, Device device = Device::cpu());
  /// CPU tensor holding a copy of `values` (size must equal the shape's element count).
  template <class T>
  static Tensor from_vector(Shape shape, const std::vector<T>& values);
  /// A tensor over `storage`'s memory from its start: a C-contiguous array of `shape` and
  /// `dtype` (not String) that fits in storage->bytes(). With Storage's external-memory
  /// constructor it reads and writes caller-owned memory without a copy (the Python module's
  /// inputs); whoever owns that memory keeps it valid while the tensor or a view of it is used.
  /// Throws Error when the array does not fit.
  static Tensor from_storage(std::shared_ptr<Storage> storage, Shape shape, DType dtype);
  /// 0-d CPU tensor.
  template <class T>
  static Tensor scalar(T value) {
    return from_vector<T>({}, std::vector<T>{value});
  }

  bool defined() const { return storage_ != nullptr; }
  const Shape& shape() const { return shape_; }
  int64_t rank() const { return static_cast<int64_t>(shape_.size()); }
  /// Size of dimension `axis` (negative counts from the end).
  int64_t dim(int64_t axis) const;
  DType dtype() const { return dtype_; }
  Device device() const;
  int64_t numel() const { return numel_; }
  size_t nbytes() const { return static_cast<size_t>(numel_) * dtype_size(dtype_); }

  void* raw_data();
  const void* raw_data() const;
  /// Typed element pointer; throws when T does not match dtype().
  template <class T>
  T* data() {
    check_type(dtype_of<T>());
    return static_cast<T*>(raw_data());
  }
  template <class T>
  const T* data() const {
    check_type(dtype_of<T>());
    return static_cast<const T*>(raw_data());
  }

  /// Same storage, new shape with the same element count (a -1 entry is inferred).
  Tensor reshape(Shape shape) const;
  /// Rows [start, start+length) of dimension `axis`. A view sharing storage when the slice is
  /// contiguous (every dimension before `axis` has size 1, or axis is 0), else a copy.
  Tensor narrow(int64_t axis, int64_t start, int64_t length) const;
  /// A copy on `device` (shares storage when already there and copy is false).
  Tensor to(Device device, bool copy = false) const;
  /// to(device), except that a string tensor stays on the host: strings have no device
  /// representation, and only host kernels read them.
  Tensor to_unless_string(Device device) const;
  /// A host copy in memory that `device` copies from by DMA (torch.Tensor.pin_memory):
  /// page-locked memory for a GPU. This tensor itself where `device`'s backend has no such
  /// memory (CPU devices, no GPU present), for strings, and when it is not on the host.
  Tensor pin_memory(Device device) const;
  /// This tensor's memory seen as a tensor of `device`, without a copy: both devices must be
  /// CPU devices, which share the host's memory. A write through either is seen by both; the
  /// alias keeps the memory alive and is never its sole owner. Returns *this on the same device.
  Tensor alias_on(Device device) const;
  /// A deep copy on the same device.
  Tensor clone() const;
  /// Copies the contents of `src` (same dtype and element count) into this tensor's memory.
  void copy_from(const Tensor& src);
  /// True when both tensors use the same storage block.
  bool shares_storage_with(const Tensor& other) const { return storage_ == other.storage_; }
  /// A handle that tells whether this tensor's storage block still exists, without keeping it
  /// alive (for caches keyed by storage).
  std::weak_ptr<const Storage> storage_handle() const { return storage_; }
  /// True when this tensor is the only owner of its storage and the storage owns its memory:
  /// nothing else can observe a write to it. Views, caller-held tensors and wrapped external
  /// memory are never sole owners.
  bool is_sole_owner() const {
    return storage_ && storage_.use_count() == 1 && storage_->owns_memory();
  }
  /// Element i converted to double (CPU tensors only); for printing and tests.
  double item_as_double(int64_t i = 0) const;
  /// "float32[2, 3] on cpu:0"
  std::string describe() const;

 private:
  void check_type(DType requested) const;
  std::shared_ptr<Storage> storage_;
  size_t offset_ = 0;  // bytes
  Shape shape_;
  int64_t numel_ = 0;
  DType dtype_ = DType::Undefined;
};

template <class T>
Tensor Tensor::from_vector(Shape shape, const std::vector<T>& values) {
  Tensor t = empty(std::move(shape), dtype_of<T>());
  DPRUN_CHECK(static_cast<int64_t>(values.size()) == t.numel(), "from_vector: ", values.size(),
              " values for shape ", shape_to_string(t.shape()));
  T* out = t.data<T>();
  for (size_t i = 0; i < values.size(); ++i) out[i] = values[i];
  return t;
}

/// Concatenates tensors of one dtype and device along `axis` onto `device`. Sizes outside
/// `axis` must agree.
Tensor concat(const std::vector<Tensor>& parts, int64_t axis, Device device);

}  // namespace dprun
