#pragma once
// The timing behind `dprun bench`: one DataParallel per device list, warmed up once, then timed
// in rounds. Rounds of several device lists interleave (1, 2, .., N devices, then again), so a
// shared machine's load drifting during a run falls on every list alike; each list keeps its
// best round, and the step times of all its rounds give the median and spread.
#include <map>
#include <memory>
#include <vector>

#include "engine/parallel/data_parallel.h"

namespace dprun::cli {

/// One device's share of a round: rows per step and mean busy milliseconds per step.
struct DeviceFigures {
  Device device;
  int64_t rows = 0;
  double busy_ms = 0;
};

/// One timed round of `iters` steps.
struct RoundResult {
  double samples_per_s = 0;  // rows_per_step * iters over the steps' summed time
  double ms_per_iter = 0;
  /// The rows each step ran, summed over the devices (what the inputs held along the split
  /// dim, whatever --batch asked for); a step whose inputs have no rows to split counts as one.
  int64_t rows_per_step = 0;
  std::vector<DeviceFigures> per_device;  // in device-list order
  std::vector<double> step_ms;            // every step, in order
};

/// Percentiles of step times (nearest rank), in milliseconds.
struct StepSpread {
  double p10 = 0, median = 0, p90 = 0;
  size_t steps = 0;
};

/// The spread of `step_ms` (all zero when empty).
StepSpread step_spread(std::vector<double> step_ms);

/// All rounds of one device list.
struct BenchResult {
  std::vector<Device> devices;
  std::vector<RoundResult> rounds;
  /// The round with the most samples per second. Requires at least one round.
  const RoundResult& best() const;
  /// The step times of every round together.
  StepSpread spread() const;
  /// Samples per second at the median step time: the statistic the --sweep table compares, as
  /// it shows median step times. Requires at least one round.
  double median_samples_per_s() const;
};

/// DataParallel inference of one model over one device list, timed round by round.
class DeviceListBench {
 public:
  DeviceListBench(const std::shared_ptr<Model>& model, const DataParallelOptions& options,
                  const std::vector<Tensor>& inputs);
  /// Runs `steps` untimed steps (replicas, primitives and caches are built here).
  void warm(int steps, const char* label);
  /// Times `iters` steps and appends the round to result().
  void time_round(int iters, const char* label);
  const BenchResult& result() const { return result_; }
  /// What DPRUN_CUDA_GRAPHS=1 did for the replicas' runs (engine/plan_graphs.h), summed.
  GraphStats graph_stats() const;

 private:
  std::shared_ptr<Model> module_;
  DataParallel parallel_;
  std::vector<Tensor> inputs_;
  BenchResult result_;
};

/// Draws a progress bar on stderr when it is a terminal, at most 5 times a second.
void progress(const char* label, int done, int total);

}  // namespace dprun::cli
