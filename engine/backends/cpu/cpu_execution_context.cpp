#include "engine/backends/cpu/cpu_execution_context.h"

#include <omp.h>

#include <algorithm>
#include <exception>
#include <mutex>
#include <vector>

#include "engine/backends/cpu/cpu_cores.h"

namespace dprun {

namespace {
/// Pins the calling thread and its OpenMP team of `threads` to `cores`. Re-pinning costs a
/// parallel region, so it is done only when this thread's configuration changes.
void pin_thread_and_team(const std::vector<int>& cores, int threads) {
  thread_local std::vector<int> pinned_cores;
  thread_local int pinned_threads = 0;
  if (pinned_cores == cores && pinned_threads == threads) return;
  pin_current_thread(cores);
  // OpenMP team threads inherit affinity only when created; re-pin the team to the share.
#pragma omp parallel num_threads(threads)
  { pin_current_thread(cores); }
  pinned_cores = cores;
  pinned_threads = threads;
}
}  // namespace

CpuExecutionContext::CpuExecutionContext(Device device, const ExecutionConfig& config)
    : device_(device), saved_threads_(omp_get_max_threads()) {
  std::vector<int> cores;
  if (config.device_count > 0) cores = cpu_core_share(device.index, config.device_count);
  const int wanted = config.threads > 0        ? config.threads
                     : config.device_count > 0 ? static_cast<int>(cores.size())
                                               : saved_threads_;
  // Never more than OMP_THREAD_LIMIT allows: a team is cut to the limit, but oneDNN sizes its
  // work by omp_get_max_threads() and would spin forever waiting for the threads never started.
  threads_ = std::min(wanted, omp_get_thread_limit());
  omp_set_num_threads(threads_);
  if (config.device_count > 0) pin_thread_and_team(cores, threads_);
}

CpuExecutionContext::~CpuExecutionContext() {
  omp_set_num_threads(saved_threads_);
}

void CpuExecutionContext::parallel_for(int64_t n, int64_t grain,
                                       const std::function<void(int64_t, int64_t)>& fn) const {
  if (n <= 0) return;
  grain = std::max<int64_t>(grain, 1);
  int64_t threads = std::min<int64_t>(threads_, (n + grain - 1) / grain);
  if (threads <= 1 || serial_depth_ > 0 || omp_in_parallel()) {
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

void CpuExecutionContext::run_on_one_thread(const std::function<void()>& fn) const {
  // Restores the thread count and the depth when fn returns or throws.
  struct Serial {
    int& depth;
    int saved = omp_get_max_threads();
    explicit Serial(int& d) : depth(d) {
      omp_set_num_threads(1);
      ++depth;
    }
    ~Serial() {
      --depth;
      omp_set_num_threads(saved);
    }
  } serial(serial_depth_);
  fn();
}

}  // namespace dprun
