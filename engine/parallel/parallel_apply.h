#pragma once
// parallel_apply(): run each replica on its own device worker, concurrently.
#include <memory>
#include <optional>
#include <vector>

#include "engine/model.h"

namespace dprun {

struct ParallelApplyOptions {
  int threads = 0;                      // intra-op threads per device; 0 = its core share
  int device_count = 0;                 // devices sharing the machine; 0 = replicas.size()
  std::vector<NodeObserver> observers;  // invoked once per replica, on its device
  /// The random ops' seed (RunOptions::random_seed): replica i runs with stream i of it.
  std::optional<uint64_t> random_seed;
};

/// Per-replica timing of the last call, in seconds.
struct ReplicaTiming {
  Device device;
  double busy_seconds = 0;
};

/// Runs replicas[i] on inputs[i] on the worker of replicas[i]->device(), all at once, and waits
/// for the workers. Each replica runs on an execution context its backend creates on the worker
/// thread (ExecutionConfig{threads, device_count}); the host does not wait for its device: the
/// outputs carry the run's event (stream_order.h), and `timings` covers the host's part (all of it
/// on the CPU; device_timing.h times the device's). When any replica fails (with an exception of
/// any type, or because it could not be queued), every worker is still joined first; then one Error
/// is raised naming each failing replica, its device and its message ("unknown exception (not
/// derived from std::exception)" when it has none).
std::vector<std::vector<Tensor>> parallel_apply(const std::vector<std::shared_ptr<Model>>& replicas,
                                                const std::vector<std::vector<Tensor>>& inputs,
                                                const ParallelApplyOptions& options = {},
                                                std::vector<ReplicaTiming>* timings = nullptr);

}  // namespace dprun
