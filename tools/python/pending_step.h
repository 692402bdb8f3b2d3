#pragma once
// dprun.PendingStep: what Trainer.step_async returns, a step that runs on the Trainer's own
// thread while the caller prepares the next batch (a DataLoader collating it, say).
#include <pybind11/pybind11.h>

#include <exception>
#include <functional>
#include <memory>
#include <optional>

namespace dprun::python {

/// What a step run in the background came to, once it has finished.
struct StepOutcome {
  bool settled = false;        // the step has finished and what follows is its outcome
  std::optional<double> loss;  // nullopt for a batch kept for `accumulate`
  std::exception_ptr error;    // what the step threw
  bool error_raised = false;   // raised to the caller once already
};

/// The handle of one step. `settle` waits for the step and fills `outcome` (called with the GIL
/// held; it releases it while waiting); `finished` says without waiting whether it has ended.
/// `owner` keeps the Trainer alive as long as the handle is.
struct PendingStep {
  std::shared_ptr<StepOutcome> outcome;
  std::function<void()> settle;
  std::function<bool()> finished;
  pybind11::object owner;
};

/// Registers PendingStep: result() (the step's loss, None for a batch kept for accumulate, or
/// its dprun.Error raised) and done().
void register_pending_step(pybind11::module_& m);

}  // namespace dprun::python
