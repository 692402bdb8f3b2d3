#pragma once
// The tables `dprun bench --profile` and `dprun train --profile` print from a NodeProfile
// (engine/node_profile.h), and the training profile's JSON.
#include <cstdint>

#include "engine/node_profile.h"
#include "tools/report_files.h"

namespace dprun::cli {

/// One row per op type, slowest first: calls and milliseconds per iteration, share.
void print_op_table(const NodeProfile& profile, int64_t iterations);
/// One row per node in execution order: op, ms per iteration, first output, input shapes.
void print_node_table(const NodeProfile& profile, int64_t iterations);

/// What a training run measured beside its profile: the profiled steps and their wall time.
struct TrainingProfileSteps {
  int64_t steps = 0;
  double seconds = 0;
};

/// The training profile: each op type's forward and backward milliseconds per step, the
/// `top` slowest nodes with their shapes, each device's node time, and the step's time outside
/// the nodes (optimizer update, batches, the executor) with the profiler's own share of it.
void print_training_profile(const NodeProfile& profile, const TrainingProfileSteps& steps,
                            size_t top = 15);
/// The same as JSON, every node included.
JsonReport training_profile_json(const NodeProfile& profile, const TrainingProfileSteps& steps);

}  // namespace dprun::cli
