#include "engine/comm/rank_failure.h"

#include <cstdint>
#include <sstream>

namespace dprun {

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
  // Ranks with the same message are listed together, in order of their first rank.
  std::vector<std::pair<std::string, std::vector<int>>> groups;
  std::vector<int> ranks;
  for (size_t r = 0; r < failed.size(); ++r) {
    if (!failed[r]) continue;
    ranks.push_back(static_cast<int>(r));
    auto it = groups.begin();
    while (it != groups.end() && it->first != messages[r]) ++it;
    if (it == groups.end())
      groups.push_back({messages[r], {static_cast<int>(r)}});
    else
      it->second.push_back(static_cast<int>(r));
  }
  std::ostringstream out;
  for (size_t g = 0; g < groups.size(); ++g) {
    const auto& [message, who] = groups[g];
    out << (g ? "; " : "") << (who.size() == 1 ? "rank " : "ranks ");
    for (size_t i = 0; i < who.size(); ++i) out << (i ? ", " : "") << who[i];
    out << ": " << message;
  }
  throw RankFailure(out.str(), ranks);
}

}  // namespace dprun
