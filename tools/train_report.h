#pragma once
// What `dprun train` reports: the loss, rows and time of every step, the throughput with and
// without the warm-up steps, and the --json file.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "engine/device.h"
#include "tools/train_validation.h"

namespace dprun::cli {

/// One optimizer step as the trainer ran it.
struct StepRecord {
  double loss = 0;
  int64_t rows = 0;
  double seconds = 0;  // wall time of Trainer::step
  double lr = 0;       // the learning rate of the step's update
  /// float16 training: the loss scale the step ran with, and whether its update was skipped
  /// because a gradient overflowed.
  std::optional<double> loss_scale;
  bool skipped = false;
  /// With --clip-grad-norm: the gradients' total norm before clipping.
  std::optional<double> grad_norm;
};

struct Throughput {
  /// Steps left out of samples_per_s: the requested warm-up steps, or 0 when the run had no
  /// more steps than that (samples_per_s is then the overall figure).
  int64_t warmup_steps = 0;
  /// Samples per second over the steps after the warm-up.
  double samples_per_s = 0;
  /// Samples per second over every step, the first ones included (they build the plan's
  /// buffers, touch fresh memory and create oneDNN primitives).
  double overall_samples_per_s = 0;
};

/// Throughput of `steps` leaving out the first `warmup_steps` of them (see Throughput).
Throughput measure_throughput(const std::vector<StepRecord>& steps, int64_t warmup_steps);

struct TrainReport {
  std::vector<StepRecord> steps;
  Throughput throughput;
  std::vector<Device> devices;
  std::vector<ValidationResult> validation;
  std::vector<std::string> parameters;
  /// The "ranks" value of a distributed run, as JSON; empty otherwise.
  std::string ranks_json;
};

/// Writes the --json file atomically: losses, lrs (each step's learning rate), step_seconds,
/// samples_per_s (after the warm-up), samples_per_s_overall, warmup_steps, devices, peak_bytes per
/// device, parameters and validation results, and ranks for a distributed run; in float16 training,
/// loss_scales (each step's) and skipped_steps (the 1-based steps whose update was skipped); with
/// clipping, grad_norms (each step's total norm before clipping).
void write_train_json(const std::string& path, const TrainReport& report);

}  // namespace dprun::cli
