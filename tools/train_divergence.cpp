#include "tools/train_divergence.h"

#include "engine/distributed/rank_failure.h"

namespace dprun::cli {

void check_parameters_finite(const Optimizer& optimizer, const std::vector<std::string>& names,
                             int64_t step, bool distributed) {
  const std::optional<size_t> i = optimizer.non_finite_parameter();
  if (!i) return;
  const std::string name = *i < names.size() ? names[*i] : detail::concat("#", *i);
  const std::string message =
      detail::concat("step ", step, ": parameter '", name,
                     "' is not finite after the update; training diverged (try a smaller --lr)");
  if (distributed) throw CollectiveError(message);
  fail(message);
}

}  // namespace dprun::cli
