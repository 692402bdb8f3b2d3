#include "engine/training/lr_schedule.h"

#include <algorithm>
#include <cmath>
#include <numbers>
#include <vector>

#include "engine/error.h"

namespace dprun {

void LrSchedule::check() const {
  DPRUN_CHECK(step_size >= 1, "lr schedule: step size ", step_size, " is not a positive count");
  DPRUN_CHECK(gamma >= 0 && std::isfinite(gamma), "lr schedule: gamma ", gamma,
              " is not a non-negative number");
  DPRUN_CHECK(eta_min >= 0 && std::isfinite(eta_min), "lr schedule: eta_min ", eta_min,
              " is not a non-negative number");
  DPRUN_CHECK(end_factor >= 0 && end_factor <= 1, "lr schedule: end factor ", end_factor,
              " is not between 0 and 1");
  DPRUN_CHECK(warmup_steps >= 0, "lr schedule: ", warmup_steps, " warm-up steps");
  DPRUN_CHECK(warmup_start_factor > 0 && warmup_start_factor <= 1,
              "lr schedule: warm-up start factor ", warmup_start_factor, " is not in (0, 1]");
}

double LrSchedule::lr(double base_lr, int64_t step, int64_t total_steps) const {
  if (step < warmup_steps)  // LinearLR(start_factor, 1.0, warmup_steps)
    return base_lr * (warmup_start_factor + (1 - warmup_start_factor) * static_cast<double>(step) /
                                                static_cast<double>(warmup_steps));
  const int64_t t = step - warmup_steps;
  // The steps the schedule proper spans (CosineAnnealingLR's T_max, LinearLR's total_iters).
  const int64_t span = std::max<int64_t>(1, total_steps - warmup_steps);
  switch (kind) {
    case LrScheduleKind::Constant:
      return base_lr;
    case LrScheduleKind::Step:
      return base_lr * std::pow(gamma, static_cast<double>(t / step_size));
    case LrScheduleKind::Exponential:
      return base_lr * std::pow(gamma, static_cast<double>(t));
    case LrScheduleKind::Cosine:
      return eta_min + (base_lr - eta_min) *
                           (1 + std::cos(std::numbers::pi * static_cast<double>(std::min(t, span)) /
                                         static_cast<double>(span))) /
                           2;
    case LrScheduleKind::Linear:
      return base_lr * (1 + (end_factor - 1) * static_cast<double>(std::min(t, span)) /
                                static_cast<double>(span));
  }
  return base_lr;
}

namespace {

std::vector<std::string> split_colons(const std::string& text) {
  std::vector<std::string> parts;
  size_t start = 0;
  for (size_t colon; (colon = text.find(':', start)) != std::string::npos; start = colon + 1)
    parts.push_back(text.substr(start, colon - start));
  parts.push_back(text.substr(start));
  return parts;
}

double number(const std::string& text, const std::string& schedule, const char* what) {
  size_t used = 0;
  double v = 0;
  try {
    v = std::stod(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  DPRUN_CHECK(used == text.size() && !text.empty(), "lr schedule '", schedule, "': ", what, " '",
              text, "' is not a number");
  return v;
}

}  // namespace

LrSchedule parse_lr_schedule(const std::string& text) {
  const std::vector<std::string> parts = split_colons(text);
  const std::string& name = parts[0];
  auto arguments = [&](size_t least, size_t most) {
    DPRUN_CHECK(parts.size() - 1 >= least && parts.size() - 1 <= most, "lr schedule '", text,
                "': ", name, " takes ", least == most ? "" : std::to_string(least) + " to ", most,
                " argument", most == 1 ? "" : "s");
  };
  LrSchedule s;
  if (name == "constant") {
    arguments(0, 0);
  } else if (name == "step") {
    arguments(1, 2);
    const double size = number(parts[1], text, "the step size");
    DPRUN_CHECK(size >= 1 && size == std::floor(size), "lr schedule '", text,
                "': the step size is not a positive whole number");
    s.kind = LrScheduleKind::Step;
    s.step_size = static_cast<int64_t>(size);
    if (parts.size() > 2) s.gamma = number(parts[2], text, "gamma");
  } else if (name == "exponential") {
    arguments(1, 1);
    s.kind = LrScheduleKind::Exponential;
    s.gamma = number(parts[1], text, "gamma");
  } else if (name == "cosine") {
    arguments(0, 1);
    s.kind = LrScheduleKind::Cosine;
    if (parts.size() > 1) s.eta_min = number(parts[1], text, "eta_min");
  } else if (name == "linear") {
    arguments(0, 1);
    s.kind = LrScheduleKind::Linear;
    if (parts.size() > 1) s.end_factor = number(parts[1], text, "the end factor");
  } else {
    fail("lr schedule '", text,
         "' is not constant, step:SIZE[:GAMMA], exponential:GAMMA, cosine[:ETA_MIN] or "
         "linear[:END_FACTOR]");
  }
  s.check();
  return s;
}

}  // namespace dprun
