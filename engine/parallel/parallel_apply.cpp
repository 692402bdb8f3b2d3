#include "engine/parallel/parallel_apply.h"

#include <chrono>
#include <exception>
#include <sstream>

#include "engine/backend.h"
#include "engine/parallel/device_timing.h"
#include "engine/parallel/device_worker.h"
#include "engine/parallel/replica_group.h"
#include "engine/random_seed.h"
#include "engine/wait_on_unwind.h"

namespace dprun {

namespace {

/// Throws one Error naming every failed replica, its device and its message; returns when
/// none failed.
void report_failures(const std::vector<std::shared_ptr<Model>>& replicas,
                     const std::vector<std::exception_ptr>& failures) {
  std::ostringstream errors;
  int failed = 0;
  for (size_t i = 0; i < failures.size(); ++i)
    if (failures[i])
      errors << (failed++ ? "; " : "") << "replica " << i << " on "
             << replicas[i]->device().to_string() << ": " << error_message(failures[i]);
  size_t n = replicas.size();
  if (failed) fail(failed, " of ", n, " replica", n == 1 ? "" : "s", " failed: ", errors.str());
}

/// Leaves the replica group when a replica's run ends, as a failure when it ends by an
/// exception.
class LeaveOnExit {
 public:
  LeaveOnExit(ReplicaGroup& group, size_t replica)
      : group_(group), replica_(replica), exceptions_(std::uncaught_exceptions()) {}
  ~LeaveOnExit() { group_.leave(replica_, std::uncaught_exceptions() > exceptions_); }
  LeaveOnExit(const LeaveOnExit&) = delete;
  LeaveOnExit& operator=(const LeaveOnExit&) = delete;

 private:
  ReplicaGroup& group_;
  size_t replica_;
  int exceptions_;
};

std::vector<std::vector<Tensor>> apply(const std::vector<std::shared_ptr<Model>>& replicas,
                                       const std::vector<std::vector<Tensor>>& inputs,
                                       const ParallelApplyOptions& options,
                                       std::vector<ReplicaTiming>* timings, bool wait_for_devices) {
  DPRUN_CHECK(replicas.size() == inputs.size(), "parallel_apply: ", replicas.size(),
              " replicas but ", inputs.size(), " input lists");
  size_t n = replicas.size();
  int device_count = options.device_count > 0 ? options.device_count : static_cast<int>(n);
  std::vector<std::vector<Tensor>> results(n);
  std::vector<double> busy(n, 0);
  std::vector<Device> devices;
  for (const auto& replica : replicas) devices.push_back(replica->device());
  // Nodes that sum over the replicas (AllReduceSum) meet in this group; a replica leaves it
  // when its run ends, so none of them waits for a replica that will not come.
  ReplicaGroup group(n);
  std::vector<std::exception_ptr> errors = run_on_workers(devices, [&](size_t i) {
    LeaveOnExit leave(group, i);
    auto start = std::chrono::steady_clock::now();
    std::unique_ptr<ExecutionContext> execution =
        backend_for(devices[i])
            .create_execution_context(devices[i],
                                      {.threads = options.threads, .device_count = device_count});
    WaitOnUnwind wait_if_failed(*execution);
    RunOptions run;
    run.observers = options.observers;
    run.context = execution.get();
    run.replica_group = &group;
    run.replica_index = i;
    if (options.random_seed) run.random_seed = derive_seed(*options.random_seed, i);
    results[i] = replicas[i]->run(inputs[i], run);
    // The run handed its outputs and inputs on with an event of its stream (engine/executor.cpp):
    // gather's copies and the collectives wait for it there, so the host does not. Only a clock
    // of the device's own time needs the host to wait.
    if (wait_for_devices) execution->synchronize();
    busy[i] = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  });
  if (timings) {
    timings->clear();
    for (size_t i = 0; i < n; ++i) timings->push_back({replicas[i]->device(), busy[i]});
  }
  report_failures(replicas, errors);
  return results;
}

}  // namespace

std::vector<std::vector<Tensor>> parallel_apply(const std::vector<std::shared_ptr<Model>>& replicas,
                                                const std::vector<std::vector<Tensor>>& inputs,
                                                const ParallelApplyOptions& options,
                                                std::vector<ReplicaTiming>* timings) {
  return apply(replicas, inputs, options, timings, false);
}

std::vector<std::vector<Tensor>> parallel_apply_timing_devices(
    const std::vector<std::shared_ptr<Model>>& replicas,
    const std::vector<std::vector<Tensor>>& inputs, const ParallelApplyOptions& options,
    std::vector<ReplicaTiming>& timings) {
  return apply(replicas, inputs, options, &timings, true);
}

}  // namespace dprun
