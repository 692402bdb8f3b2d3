#include "engine/parallel/parallel_apply.h"

#include <chrono>
#include <future>
#include <sstream>

#include "engine/backend.h"
#include "engine/parallel/device_worker.h"

namespace dprun {

std::vector<std::vector<Tensor>> parallel_apply(const std::vector<std::shared_ptr<Model>>& replicas,
                                                const std::vector<std::vector<Tensor>>& inputs,
                                                const ParallelApplyOptions& options,
                                                std::vector<ReplicaTiming>* timings) {
  DPRUN_CHECK(replicas.size() == inputs.size(), "parallel_apply: ", replicas.size(),
              " replicas but ", inputs.size(), " input lists");
  size_t n = replicas.size();
  int device_count = options.device_count > 0 ? options.device_count : static_cast<int>(n);
  std::vector<std::vector<Tensor>> results(n);
  std::vector<double> busy(n, 0);
  std::vector<std::future<void>> done;
  for (size_t i = 0; i < n; ++i) {
    Model* replica = replicas[i].get();
    Device device = replica->device();
    done.push_back(device_worker(device).submit([&, i, replica, device] {
      auto start = std::chrono::steady_clock::now();
      RunOptions run;
      run.threads =
          backend_for(device).prepare_worker_thread(device, device_count, options.threads);
      run.observers = options.observers;
      results[i] = replica->run(inputs[i], run);
      busy[i] = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    }));
  }
  // Join every worker before reporting, so no task still uses this frame's state.
  std::ostringstream errors;
  int failed = 0;
  for (size_t i = 0; i < n; ++i) {
    try {
      done[i].get();
    } catch (const std::exception& e) {
      errors << (failed++ ? "; " : "") << "replica " << i << " on "
             << replicas[i]->device().to_string() << ": " << e.what();
    }
  }
  if (timings) {
    timings->clear();
    for (size_t i = 0; i < n; ++i) timings->push_back({replicas[i]->device(), busy[i]});
  }
  if (failed) fail(failed, " of ", n, " replica", n == 1 ? "" : "s", " failed: ", errors.str());
  return results;
}

}  // namespace dprun
