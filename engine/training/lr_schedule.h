#pragma once
// Learning-rate schedules over optimizer steps, with the values of torch.optim.lr_scheduler's
// (1.13) when its scheduler.step() runs after every optimizer.step():
//
//   LrSchedule schedule{.kind = LrScheduleKind::Cosine, .warmup_steps = 100};
//   for (int64_t t = 0; t < steps; ++t) {
//     optimizer.set_lr(schedule.lr(base_lr, t, steps));
//     trainer.step(inputs, target, optimizer);
//   }
//
// A linear warm-up (LinearLR(start_factor, end_factor 1, total_iters = warmup_steps)) comes
// first when warmup_steps > 0; the schedule proper then counts its steps from the end of the
// warm-up, as SequentialLR([LinearLR, S], milestones=[warmup_steps]) runs S. The values are
// the schedulers' closed forms; their recursive forms, which PyTorch steps, agree to within
// double rounding.
#include <cstdint>
#include <string>

namespace dprun {

enum class LrScheduleKind {
  Constant,     // the base lr
  Step,         // StepLR: times gamma every step_size steps
  Exponential,  // ExponentialLR: times gamma every step
  Cosine,       // CosineAnnealingLR(T_max = the steps after the warm-up, eta_min)
  Linear,       // LinearLR(1, end_factor, T = the steps after the warm-up): a linear decay
};

struct LrSchedule {
  LrScheduleKind kind = LrScheduleKind::Constant;
  int64_t step_size = 1;  // Step
  double gamma = 0.1;     // Step, Exponential
  double eta_min = 0;     // Cosine: the last lr
  double end_factor = 0;  // Linear: the last lr over the base lr
  int64_t warmup_steps = 0;
  /// The warm-up's first lr over the base lr (LinearLR's start_factor, in (0, 1]).
  double warmup_start_factor = 1.0 / 3;

  /// Throws Error naming the field that is out of range (a step_size below 1, a negative
  /// gamma or eta_min, a warm-up factor outside (0, 1], an end_factor outside [0, 1]).
  void check() const;
  /// The lr of optimizer step `step` (0 for the first update) of a run of `total_steps`.
  double lr(double base_lr, int64_t step, int64_t total_steps) const;
};

/// Parses the command line's form: constant | step:SIZE[:GAMMA] | exponential:GAMMA |
/// cosine[:ETA_MIN] | linear[:END_FACTOR]. Throws Error naming what is wrong.
LrSchedule parse_lr_schedule(const std::string& text);

}  // namespace dprun
