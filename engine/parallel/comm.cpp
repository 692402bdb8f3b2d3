#include "engine/parallel/comm.h"

#include "engine/dtype.h"
#include "engine/parallel/run_in_parts.h"

namespace dprun {

namespace {

// Below this many elements in all, one thread sums them.
constexpr int64_t kMinParallelElements = 1 << 15;

// out = parts[0] + parts[1] + ..., element by element in list order.
template <class T>
void sum_range(T* out, const std::vector<const T*>& parts, int64_t first, int64_t last) {
  const T* a = parts[0];
  if (parts.size() == 1) {
    for (int64_t i = first; i < last; ++i) out[i] = a[i];
    return;
  }
  const T* b = parts[1];
  for (int64_t i = first; i < last; ++i) out[i] = a[i] + b[i];
  for (size_t p = 2; p < parts.size(); ++p) {
    const T* c = parts[p];
    for (int64_t i = first; i < last; ++i) out[i] += c[i];
  }
}

template <class T>
std::vector<const T*> pointers(const std::vector<Tensor>& parts) {
  std::vector<const T*> out;
  for (const Tensor& t : parts) out.push_back(t.data<T>());
  return out;
}

}  // namespace

Tensor reduce_add(const std::vector<Tensor>& inputs, Device destination) {
  std::vector<std::vector<Tensor>> lists;
  for (const Tensor& t : inputs) lists.push_back({t});
  DPRUN_CHECK(!lists.empty(), "reduce_add: no tensors given");
  return reduce_add_coalesced(lists, destination)[0];
}

std::vector<Tensor> reduce_add_coalesced(const std::vector<std::vector<Tensor>>& inputs,
                                         Device destination, const std::vector<Device>& workers) {
  DPRUN_CHECK(!inputs.empty(), "reduce_add: no tensors given");
  // CPU devices share host memory, so the parts are read where they are.
  DPRUN_CHECK(destination.type == DeviceType::CPU, "reduce_add onto ", destination.to_string(),
              " is not supported: this build sums on CPU devices only");
  const size_t count = inputs[0].size();
  // parts[k][d]: device d's tensor k, in host memory.
  std::vector<std::vector<Tensor>> parts(count);
  std::vector<Tensor> sums;
  for (size_t k = 0; k < count; ++k) {
    const Tensor& first = inputs[0][k];
    DPRUN_CHECK(first.dtype() == DType::Float32 || first.dtype() == DType::Float64,
                "reduce_add: only float32 and float64 tensors can be summed, not ",
                first.describe());
    for (size_t d = 0; d < inputs.size(); ++d) {
      DPRUN_CHECK(inputs[d].size() == count, "reduce_add: device ", d, " gave ", inputs[d].size(),
                  " tensors but device 0 gave ", count);
      const Tensor& t = inputs[d][k];
      DPRUN_CHECK(t.shape() == first.shape() && t.dtype() == first.dtype(), "reduce_add: tensor ",
                  d, " is ", t.describe(), " but tensor 0 is ", first.describe());
      parts[k].push_back(t.device().type == DeviceType::CPU ? t : t.to(destination));
    }
    sums.push_back(Tensor::empty(first.shape(), first.dtype(), destination));
  }
  std::vector<int64_t> counts = element_counts(sums);
  int64_t total = 0;
  for (int64_t c : counts) total += c;
  run_in_parts(workers, total, kMinParallelElements, [&](int64_t begin, int64_t end) {
    for_each_piece(counts, begin, end, [&](size_t k, int64_t first, int64_t last) {
      if (sums[k].dtype() == DType::Float64)
        sum_range(sums[k].data<double>(), pointers<double>(parts[k]), first, last);
      else
        sum_range(sums[k].data<float>(), pointers<float>(parts[k]), first, last);
    });
  });
  return sums;
}

}  // namespace dprun
