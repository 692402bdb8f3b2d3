#pragma once
// Intra-op parallelism. Work is split over the calling thread's OpenMP team, whose size is the
// device's thread count (set by the executor with set_intra_op_threads).
#include <cstdint>
#include <functional>

namespace dprun {

/// Runs fn(begin, end) over [0, n) in chunks of at least `grain` items, in parallel when
/// the range is large enough and more than one intra-op thread is configured.
void parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn);
/// Sets the intra-op threads of the calling thread (OpenMP and oneDNN follow it).
void set_intra_op_threads(int threads);
int intra_op_threads();

}  // namespace dprun
