#include "engine/distributed/process_group.h"

#include <algorithm>

#include "engine/half.h"

namespace dprun {

std::vector<std::string> all_gather_strings(ProcessGroup& group, const std::string& text) {
  auto lengths = all_gather_values<uint64_t>(group, text.size());
  uint64_t longest = *std::max_element(lengths.begin(), lengths.end());
  std::vector<uint8_t> mine(longest, 0);
  std::memcpy(mine.data(), text.data(), text.size());
  std::vector<uint8_t> all = group.all_gather(mine);
  std::vector<std::string> out;
  for (size_t r = 0; r < lengths.size(); ++r)
    out.emplace_back(reinterpret_cast<const char*>(all.data() + r * longest), lengths[r]);
  return out;
}

void ProcessGroup::broadcast_coalesced(const std::vector<Tensor>& tensors, int root) {
  for (const Tensor& t : tensors) broadcast(t, root);
}

void all_reduce_sum_now(ProcessGroup& group, Tensor tensor, ReduceOrder order) {
  group.all_reduce_sum(std::move(tensor), order)->wait();
}

namespace {
template <class T>
void add_typed(T* sum, const T* part, int64_t count) {
  for (int64_t i = 0; i < count; ++i) sum[i] += part[i];
}

template <class T>
void add_16bit(T* sum, const T* part, int64_t count) {
  for (int64_t i = 0; i < count; ++i)
    sum[i] = T(static_cast<float>(sum[i]) + static_cast<float>(part[i]));
}
}  // namespace

bool can_all_reduce(DType dtype) {
  return dtype == DType::Float32 || dtype == DType::Float64 || dtype == DType::Float16 ||
         dtype == DType::BFloat16;
}

void check_all_reducible(const Tensor& tensor) {
  DPRUN_CHECK(can_all_reduce(tensor.dtype()),
              "all_reduce_sum: only float32, float64, float16 and bfloat16 tensors can be summed, "
              "not ",
              tensor.describe());
}

void add_in_place(void* sum, const void* part, int64_t count, DType dtype) {
  switch (dtype) {
    case DType::Float64:
      return add_typed(static_cast<double*>(sum), static_cast<const double*>(part), count);
    case DType::Float32:
      return add_typed(static_cast<float*>(sum), static_cast<const float*>(part), count);
    case DType::Float16:
      return add_16bit(static_cast<Float16*>(sum), static_cast<const Float16*>(part), count);
    case DType::BFloat16:
      return add_16bit(static_cast<BFloat16*>(sum), static_cast<const BFloat16*>(part), count);
    default:
      fail(
          "all_reduce_sum: only float32, float64, float16 and bfloat16 tensors can be summed, not ",
          dtype_name(dtype));
  }
}

}  // namespace dprun
