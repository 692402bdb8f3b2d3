#include "engine/execution_context.h"

namespace dprun {

void ExecutionContext::parallel_for(int64_t n, int64_t,
                                    const std::function<void(int64_t, int64_t)>& fn) const {
  if (n > 0) fn(0, n);
}

}  // namespace dprun
