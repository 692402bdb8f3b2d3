#pragma once
// Dropping one kind of stream wait on the simulated devices for a scope of a test
// (engine/backends/sim/sim_drop_wait.h).
#include <cstdlib>

namespace dprun::testing {

/// Sets DPRUN_SIM_DROP_WAIT to `kinds` for its lifetime.
class DropWait {
 public:
  explicit DropWait(const char* kinds) { setenv("DPRUN_SIM_DROP_WAIT", kinds, 1); }
  ~DropWait() { unsetenv("DPRUN_SIM_DROP_WAIT"); }
  DropWait(const DropWait&) = delete;
  DropWait& operator=(const DropWait&) = delete;
};

}  // namespace dprun::testing
