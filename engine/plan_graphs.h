#pragma once
// Steady-state runs as captured graphs (CUDA graphs), behind DPRUN_CUDA_GRAPHS=1. A run whose
// key repeats (the plan, the device, every feed's dtype and shape, the parameters' addresses,
// and the seed where the plan draws random numbers) is captured on its second sighting (the
// first is a plain run that warms the kernels' caches up) and replayed from then on, as
// torch.cuda.CUDAGraph is used: the feeds are copied into the graph's static inputs, the
// captured work is replayed on the run's stream, and the static outputs are copied out.
//
// A key whose capture fails (a kernel makes the host wait or reads device memory on the host:
// host fallbacks, control flow, NonZero; a copy from host memory; an allocation outside the
// graph's pool) falls back to plain runs, once and for good, without an error: its capture is
// discarded and the run gives its result by the plain path. So do keys of a plan with random
// ops run without a seed (each run would draw afresh). Runs with observers, overridden
// initializers, feeds that are strings or missing, nested runs and a replica group's runs of a
// plan that sums across replicas are never captured.
//
// Stream order (engine/stream_order.h) holds for replays as for plain runs: the replay's stream
// waits for the ready events of the feeds, the parameters and the graph's static buffers (the
// previous replay, maybe on another stream, used them), and hands them on, with the outputs,
// under one event at its end.
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "engine/executor.h"

namespace dprun {

class GraphRunContext;
class RunOrder;

/// What the graphs of one model have done since it was made.
struct GraphStats {
  int64_t captures = 0;       // graphs captured (each run that captured also ran it once)
  int64_t replays = 0;        // runs that replayed a graph captured earlier
  int64_t fallbacks = 0;      // keys that fell back to plain runs for good
  std::string last_fallback;  // why the latest of them did
};

/// The captured graphs of one model's plan on one device, by key. Thread-safe: one run at a
/// time uses a graph's static buffers; a run that finds them busy runs plainly.
class PlanGraphs {
 public:
  /// Whether DPRUN_CUDA_GRAPHS=1 and `device`'s type can capture (engine/stream_capture.h).
  static bool enabled_for(Device device);

  /// execute_plan (without overrides), through a captured graph where the key repeats.
  std::vector<Tensor> run(const Plan& plan, Device device, const std::vector<Tensor>& parameters,
                          const std::vector<Tensor>& feeds, const RunOptions& options);
  GraphStats stats() const;

 private:
  struct Key {
    Device device;
    std::vector<std::pair<DType, Shape>> feeds;
    std::vector<const void*> parameters;
    std::optional<uint64_t> seed;
    auto operator<=>(const Key&) const = default;
  };
  struct Entry;

  // Why runs of `plan` with `options` are never captured; empty when they may be.
  std::string never_captured(const Plan& plan, const std::vector<Tensor>& feeds,
                             const RunOptions& options);
  std::shared_ptr<Entry> entry_for(Key key);
  void fell_back(Entry& entry, const std::string& why);
  // The run that captures the key's graph, or falls back for good when the capture fails.
  std::vector<Tensor> capture(Entry& entry, const Plan& plan, const std::vector<Tensor>& parameters,
                              const std::vector<Tensor>& feeds, const GraphRunContext& context,
                              RunOrder& order);
  std::vector<Tensor> replay(Entry& entry, const Plan& plan, const std::vector<Tensor>& parameters,
                             const std::vector<Tensor>& feeds, const GraphRunContext& context,
                             RunOrder& order);

  mutable std::mutex mutex_;
  std::map<Key, std::shared_ptr<Entry>> entries_;
  GraphStats stats_;
  std::optional<bool> draws_random_;       // the plan has random ops
  std::optional<bool> combines_replicas_;  // the plan has ops that sum across replicas
};

}  // namespace dprun
