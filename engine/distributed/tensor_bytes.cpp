#include "engine/distributed/tensor_bytes.h"

#include <cstring>

namespace dprun {

namespace {

void put_bytes(std::vector<uint8_t>& out, const void* data, size_t n) {
  size_t at = out.size();
  out.resize(at + n);
  if (n) std::memcpy(out.data() + at, data, n);
}

template <class T>
void put(std::vector<uint8_t>& out, T value) {
  put_bytes(out, &value, sizeof(T));
}

class Reader {
 public:
  explicit Reader(std::span<const uint8_t> bytes) : bytes_(bytes) {}
  template <class T>
  T get() {
    T value;
    std::memcpy(&value, take(sizeof(T)), sizeof(T));
    return value;
  }
  const uint8_t* take(size_t n) {
    DPRUN_CHECK(n <= bytes_.size() - at_, "unpack_tensors: the record ends too early");
    const uint8_t* p = bytes_.data() + at_;
    at_ += n;
    return p;
  }
  bool done() const { return at_ == bytes_.size(); }

 private:
  std::span<const uint8_t> bytes_;
  size_t at_ = 0;
};

}  // namespace

std::vector<uint8_t> pack_tensors(const std::vector<Tensor>& tensors) {
  std::vector<uint8_t> out;
  put<uint64_t>(out, tensors.size());
  for (const Tensor& t : tensors) {
    DPRUN_CHECK(t.dtype() != DType::String, "a string tensor (", t.describe(),
                ") cannot be sent to another rank");
    Tensor host = t.to(Device::cpu());
    put<int32_t>(out, static_cast<int32_t>(t.dtype()));
    put<uint64_t>(out, t.shape().size());
    for (int64_t d : t.shape()) put<int64_t>(out, d);
    put_bytes(out, host.raw_data(), host.nbytes());
  }
  return out;
}

std::vector<Tensor> unpack_tensors(std::span<const uint8_t> bytes) {
  Reader in(bytes);
  std::vector<Tensor> tensors;
  auto count = in.get<uint64_t>();
  for (uint64_t i = 0; i < count; ++i) {
    auto dtype = static_cast<DType>(in.get<int32_t>());
    DPRUN_CHECK(is_storable(dtype), "unpack_tensors: tensor ", i, " has no valid dtype");
    auto rank = in.get<uint64_t>();
    DPRUN_CHECK(rank <= 64, "unpack_tensors: tensor ", i, " has rank ", rank);
    Shape shape(rank);
    for (int64_t& d : shape) d = in.get<int64_t>();
    Tensor t = Tensor::empty(shape, dtype);
    std::memcpy(t.raw_data(), in.take(t.nbytes()), t.nbytes());
    tensors.push_back(std::move(t));
  }
  DPRUN_CHECK(in.done(), "unpack_tensors: bytes left after the last tensor");
  return tensors;
}

}  // namespace dprun
