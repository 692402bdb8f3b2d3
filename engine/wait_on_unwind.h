#pragma once
// Waiting for an execution context's queued work when a run fails.
#include <exception>

#include "engine/execution_context.h"

namespace dprun {

/// Waits for `context`'s queued work when the guarded scope is left by an exception. Kernels
/// queued on a GPU stream before the failure may still read the run's inputs; the caller frees
/// them as the error reaches it, and a caching allocator could hand that memory to other work
/// first. A failure while waiting is dropped: the exception in flight is the one to report.
class WaitOnUnwind {
 public:
  explicit WaitOnUnwind(ExecutionContext& context)
      : context_(context), exceptions_(std::uncaught_exceptions()) {}
  ~WaitOnUnwind() {
    if (std::uncaught_exceptions() == exceptions_) return;
    try {
      context_.synchronize();
    } catch (...) {  // NOLINT(bugprone-empty-catch): see the class comment
    }
  }
  WaitOnUnwind(const WaitOnUnwind&) = delete;
  WaitOnUnwind& operator=(const WaitOnUnwind&) = delete;

 private:
  ExecutionContext& context_;
  int exceptions_;
};

}  // namespace dprun
