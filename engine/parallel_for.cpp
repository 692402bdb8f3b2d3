#include "engine/parallel_for.h"

#include <omp.h>

#include <algorithm>
#include <exception>
#include <mutex>

namespace dprun {

void set_intra_op_threads(int threads) {
  omp_set_num_threads(std::max(1, threads));
}

int intra_op_threads() {
  return omp_get_max_threads();
}

void parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn) {
  if (n <= 0) return;
  grain = std::max<int64_t>(grain, 1);
  int64_t threads = std::min<int64_t>(omp_get_max_threads(), (n + grain - 1) / grain);
  if (threads <= 1 || omp_in_parallel()) {
    fn(0, n);
    return;
  }
  // Exceptions must not cross the OpenMP region: keep the first and rethrow it after.
  std::exception_ptr error;
  std::mutex error_mutex;
#pragma omp parallel num_threads(static_cast <int>(threads))
  {
    int64_t t = omp_get_thread_num();
    int64_t count = omp_get_num_threads();
    int64_t begin = n * t / count, end = n * (t + 1) / count;
    try {
      if (begin < end) fn(begin, end);
    } catch (...) {
      std::lock_guard lock(error_mutex);
      if (!error) error = std::current_exception();
    }
  }
  if (error) std::rethrow_exception(error);
}

}  // namespace dprun
