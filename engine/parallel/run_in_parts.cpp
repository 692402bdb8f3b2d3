#include "engine/parallel/run_in_parts.h"

#include <algorithm>
#include <exception>

#include "engine/parallel/device_worker.h"

namespace dprun {

void run_in_parts(const std::vector<Device>& devices, int64_t n, int64_t min_parallel,
                  const std::function<void(int64_t, int64_t)>& fn) {
  if (n <= 0) return;
  std::vector<Device> cpus;
  for (const Device& d : devices)
    if (d.type == DeviceType::CPU) cpus.push_back(d);
  if (cpus.size() < 2 || n < min_parallel) {
    fn(0, n);
    return;
  }
  const auto parts = static_cast<int64_t>(cpus.size());
  auto bounds = [n, parts](int64_t k) { return n * k / parts; };
  std::vector<std::exception_ptr> failures =
      run_on_workers(cpus, [&](size_t k) { fn(bounds(int64_t(k)), bounds(int64_t(k) + 1)); });
  for (const auto& failure : failures)
    if (failure) std::rethrow_exception(failure);
}

void for_each_piece(const std::vector<int64_t>& counts, int64_t begin, int64_t end,
                    const std::function<void(size_t, int64_t, int64_t)>& fn) {
  int64_t offset = 0;
  for (size_t i = 0; i < counts.size() && offset < end; ++i) {
    int64_t first = std::max(begin, offset), last = std::min(end, offset + counts[i]);
    if (first < last) fn(i, first - offset, last - offset);
    offset += counts[i];
  }
}

std::vector<int64_t> element_counts(const std::vector<Tensor>& tensors) {
  std::vector<int64_t> counts;
  counts.reserve(tensors.size());
  for (const Tensor& t : tensors) counts.push_back(t.numel());
  return counts;
}

}  // namespace dprun
