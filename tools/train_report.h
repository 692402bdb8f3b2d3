#pragma once
// What `dprun train` reports: the loss, rows and time of every step, the throughput with and
// without the warm-up steps, and the --json file.
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "engine/device.h"
#include "engine/training/grad_scaler.h"
#include "engine/training/training_run.h"
#include "engine/training/validation.h"
#include "tools/report_files.h"

namespace dprun::cli {

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
  /// The process's resident memory before the model was loaded (tools/process_memory.h).
  int64_t baseline_resident_bytes = 0;
  std::vector<StepRecord> steps;
  Throughput throughput;
  std::vector<Device> devices;
  std::vector<ValidationResult> validation;
  std::vector<std::string> parameters;
  /// The "ranks" value of a distributed run; null otherwise.
  JsonReport ranks;
  /// --profile's figures (tools/profile_report.h); null without it.
  JsonReport profile;
};

/// How `dprun train` shows its progress within an epoch.
struct ProgressOptions {
  /// --log-every N: a line every N steps (0: not asked for).
  int64_t every_steps = 0;
  /// Without --log-every and without a terminal: a line when this many seconds have passed
  /// since the last one, so that logs (nohup, mpirun, CI) show a long epoch moving.
  double every_seconds = 10;
  /// Whether stderr is a terminal: then, without --log-every, a bar redrawn at most
  /// `redraws_per_second` times a second (a redraw per step writes megabytes on a fast model).
  bool terminal = false;
  double redraws_per_second = 5;
};

/// The progress bar or lines within an epoch and one line per epoch; in float16 training both
/// show the loss scale and the steps skipped so far (`scaler`).
class Progress {
 public:
  Progress(int64_t total, const GradScaler* scaler, ProgressOptions options);
  /// After step `step` (1-based) of the run, with its batch's loss and the samples/s so far.
  void update(int64_t step, double loss, double samples_per_s);
  void epoch_done(int64_t epoch, double mean_loss, double samples_per_s,
                  const std::optional<ValidationResult>& val);

 private:
  using Clock = std::chrono::steady_clock;
  std::string scaling() const;
  void draw_bar(int64_t step, double loss, double samples_per_s);
  int64_t total_;
  const GradScaler* scaler_;
  ProgressOptions options_;
  Clock::time_point last_shown_ = Clock::now();
  bool bar_shown_ = false;  // a bar is on the terminal's last line
};

/// Writes the --json file atomically: losses, lrs (each step's learning rate), step_seconds,
/// samples_per_s (after the warm-up), samples_per_s_overall, warmup_steps, devices, peak_bytes per
/// device (the tensors' allocator), peak_resident_bytes (the process's peak resident memory over
/// its own before the model was loaded: weights, activations, gradients, optimizer state, plans),
/// parameters and validation results, and ranks for a distributed run; in float16 training,
/// loss_scales (each step's) and skipped_steps (the 1-based steps whose update was skipped); with
/// clipping, grad_norms (each step's total norm before clipping).
void write_train_json(const std::string& path, const TrainReport& report);

}  // namespace dprun::cli
