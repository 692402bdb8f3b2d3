#include "engine/distributed/rank_failure.h"

#include <cstdint>
#include <sstream>

namespace dprun {

std::string ranks_text(const std::vector<int>& ranks) {
  std::ostringstream out;
  out << (ranks.size() == 1 ? "rank " : "ranks ");
  for (size_t i = 0; i < ranks.size(); ++i) out << (i ? ", " : "") << ranks[i];
  return out.str();
}

std::vector<std::pair<std::string, std::vector<int>>> ranks_by_value(
    const std::vector<std::pair<int, std::string>>& rank_values) {
  std::vector<std::pair<std::string, std::vector<int>>> groups;
  for (const auto& [rank, value] : rank_values) {
    auto it = groups.begin();
    while (it != groups.end() && it->first != value) ++it;
    if (it == groups.end())
      groups.push_back({value, {rank}});
    else
      it->second.push_back(rank);
  }
  return groups;
}

void throw_if_any_rank_failed(ProcessGroup& group, const std::exception_ptr& local_error) {
  auto flags = all_gather_values<uint8_t>(group, local_error ? 1 : 0);
  std::vector<bool> failed(flags.begin(), flags.end());
  throw_rank_failures(group, failed, local_error);
}

void throw_rank_failures(ProcessGroup& group, const std::vector<bool>& failed,
                         const std::exception_ptr& local_error) {
  bool any = false;
  for (bool f : failed) any |= f;
  if (!any) return;
  std::vector<std::string> messages = all_gather_strings(group, error_message(local_error));
  std::vector<std::pair<int, std::string>> failures;
  std::vector<int> ranks;
  for (size_t r = 0; r < failed.size(); ++r) {
    if (!failed[r]) continue;
    ranks.push_back(static_cast<int>(r));
    failures.push_back({static_cast<int>(r), messages[r]});
  }
  const auto groups = ranks_by_value(failures);  // ranks with the same message together
  std::ostringstream out;
  for (size_t g = 0; g < groups.size(); ++g)
    out << (g ? "; " : "") << ranks_text(groups[g].second) << ": " << groups[g].first;
  throw RankFailure(out.str(), ranks);
}

}  // namespace dprun
