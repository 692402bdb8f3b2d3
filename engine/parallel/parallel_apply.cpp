#include "engine/parallel/parallel_apply.h"

#include <chrono>
#include <exception>
#include <future>
#include <optional>
#include <sstream>

#include "engine/backend.h"
#include "engine/parallel/device_worker.h"

namespace dprun {

namespace {

/// The message of the exception being handled; call only inside a catch block.
std::string current_exception_message() {
  try {
    throw;
  } catch (const std::exception& e) {
    return e.what();
  } catch (...) {
    return "unknown exception (not derived from std::exception)";
  }
}

/// Waits for `done` when it was submitted; returns the failure it reports, if any. Never
/// throws, so the caller can join every replica before it reports.
std::optional<std::string> join(std::future<void>& done, bool spin) {
  if (!done.valid()) return std::nullopt;
  try {
    wait_for_task(done, spin);
    return std::nullopt;
  } catch (...) {
    return current_exception_message();
  }
}

/// Throws one Error naming every failed replica, its device and its message; returns when
/// none failed.
void report_failures(const std::vector<std::shared_ptr<Model>>& replicas,
                     const std::vector<std::optional<std::string>>& failures) {
  std::ostringstream errors;
  int failed = 0;
  for (size_t i = 0; i < failures.size(); ++i)
    if (failures[i])
      errors << (failed++ ? "; " : "") << "replica " << i << " on "
             << replicas[i]->device().to_string() << ": " << *failures[i];
  size_t n = replicas.size();
  if (failed) fail(failed, " of ", n, " replica", n == 1 ? "" : "s", " failed: ", errors.str());
}

}  // namespace

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
  std::vector<std::future<void>> done(n);
  std::vector<std::optional<std::string>> failures(n);
  for (size_t i = 0; i < n; ++i) {
    Model* replica = replicas[i].get();
    Device device = replica->device();
    // The tasks refer to this frame: a replica that cannot be queued is recorded, not thrown,
    // so that the ones already queued are joined below.
    try {
      done[i] = device_worker(device).submit([&, i, replica, device] {
        auto start = std::chrono::steady_clock::now();
        std::unique_ptr<ExecutionContext> execution = backend_for(device).create_execution_context(
            device, {.threads = options.threads, .device_count = device_count});
        RunOptions run;
        run.observers = options.observers;
        run.context = execution.get();
        results[i] = replica->run(inputs[i], run);
        // The replica's work may still be queued on the device (a GPU stream): wait for it, so
        // the clock measures the device's time and the results are ready for gather.
        execution->synchronize();
        busy[i] = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      });
    } catch (...) {
      failures[i] = current_exception_message();
    }
  }
  // Join every worker before reporting, so no task still uses this frame's state.
  const bool spin = may_spin_while(n);
  for (size_t i = 0; i < n; ++i)
    if (auto failure = join(done[i], spin)) failures[i] = std::move(failure);
  if (timings) {
    timings->clear();
    for (size_t i = 0; i < n; ++i) timings->push_back({replicas[i]->device(), busy[i]});
  }
  report_failures(replicas, failures);
  return results;
}

}  // namespace dprun
