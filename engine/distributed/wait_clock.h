#pragma once
// How long a wait for other ranks has lasted while this process ran. A gap between two looks
// at the clock longer than kStoppedGap means the process did not run (stopped by SIGSTOP, or
// the machine froze): that time is counted as stopped, not waited, so that a rank stopped
// while it waited does not, once resumed, blame the others for its own absence.
#include <chrono>

namespace dprun {

struct WaitClock {
  using Clock = std::chrono::steady_clock;
  /// Seconds between two looks beyond which the process is taken to have been stopped. Waits
  /// look at the clock at least every few milliseconds.
  static constexpr double kStoppedGap = 1.0;

  Clock::time_point last = Clock::now();
  double waited = 0;   // seconds this process ran since the wait began
  double stopped = 0;  // seconds it did not run

  /// Counts the time since the last look as waited, or as stopped when it exceeds kStoppedGap.
  void tick(Clock::time_point now = Clock::now()) {
    const double step = std::chrono::duration<double>(now - last).count();
    (step > kStoppedGap ? stopped : waited) += step;
    last = now;
  }
};

}  // namespace dprun
