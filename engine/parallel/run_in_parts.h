#pragma once
// Host-memory loops split over the CPU devices' workers: summing gradients, optimizer updates
// and parameter copies between a data-parallel step's replica runs, when the devices would
// otherwise sit idle while one thread does the work.
#include <cstdint>
#include <functional>
#include <vector>

#include "engine/device.h"
#include "engine/tensor.h"

namespace dprun {

/// Runs fn(begin, end) over [0, n) split into contiguous parts, one per device of `devices`
/// (CPU devices; others are skipped), concurrently on the devices' workers, the calling thread
/// taking one part itself (run_on_workers). Returns when every part is done, then rethrows the
/// exception of the first part (in part order) that threw. With fewer than two CPU devices or
/// n < min_parallel, runs fn(0, n) on the calling thread; with n <= 0, does nothing. `fn` must
/// only write what its range owns.
void run_in_parts(const std::vector<Device>& devices, int64_t n, int64_t min_parallel,
                  const std::function<void(int64_t, int64_t)>& fn);

/// The elements [begin, end) of the concatenation of tensors with these element counts, as
/// pieces of each: calls fn(index, first, last) for every tensor the range covers, with the
/// range [first, last) of that tensor's elements.
void for_each_piece(const std::vector<int64_t>& counts, int64_t begin, int64_t end,
                    const std::function<void(size_t, int64_t, int64_t)>& fn);

/// Element counts of `tensors`, for for_each_piece.
std::vector<int64_t> element_counts(const std::vector<Tensor>& tensors);

}  // namespace dprun
