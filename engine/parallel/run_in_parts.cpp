#include "engine/parallel/run_in_parts.h"

#include <algorithm>
#include <exception>
#include <future>

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
  auto run = [&fn, &bounds](int64_t k) { fn(bounds(k), bounds(k + 1)); };
  // Every part goes to a worker, part 0 included: the workers have just finished a step's
  // replica runs and poll for work, while this thread would have to be woken from a wait.
  std::vector<std::future<void>> done(static_cast<size_t>(parts));
  std::vector<std::exception_ptr> failures(static_cast<size_t>(parts));
  for (int64_t k = 0; k < parts; ++k) {
    try {
      done[static_cast<size_t>(k)] =
          device_worker(cpus[static_cast<size_t>(k)]).submit([&run, k] { run(k); });
    } catch (...) {
      // Not queued (no memory or no thread): run below, on this thread.
    }
  }
  const bool spin = may_spin_while(static_cast<size_t>(parts));
  for (int64_t k = 0; k < parts; ++k) {
    auto& d = done[static_cast<size_t>(k)];
    // Every queued part refers to this frame: all are joined before anything is rethrown.
    try {
      if (d.valid())
        wait_for_task(d, spin);
      else
        run(k);
    } catch (...) {
      failures[static_cast<size_t>(k)] = std::current_exception();
    }
  }
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
