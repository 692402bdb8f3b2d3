#include "tools/typo_hints.h"

#include <algorithm>

namespace dprun::cli {

size_t edit_distance(const std::string& a, const std::string& b) {
  // d[i][j]: the distance between the first i characters of a and the first j of b.
  std::vector<std::vector<size_t>> d(a.size() + 1, std::vector<size_t>(b.size() + 1));
  for (size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
  for (size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
  for (size_t i = 1; i <= a.size(); ++i)
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1])
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
    }
  return d[a.size()][b.size()];
}

std::optional<std::string> nearest(const std::string& word,
                                   const std::vector<std::string>& candidates) {
  std::optional<std::string> best;
  if (word.empty()) return best;
  size_t best_distance = std::min<size_t>(2, (word.size() - 1) / 2) + 1;
  for (const std::string& c : candidates) {
    const size_t distance = edit_distance(word, c);
    if (distance < best_distance) {
      best = c;
      best_distance = distance;
    }
  }
  return best;
}

std::optional<std::string> suggest_device(const std::string& item) {
  const size_t colon = item.find(':');
  const std::string kind = item.substr(0, colon);
  std::string index = colon == std::string::npos ? "" : item.substr(colon + 1);
  // Letters that look like digits: O for 0, l and I for 1.
  for (char& c : index) {
    if (c == 'O' || c == 'o') c = '0';
    if (c == 'l' || c == 'I') c = '1';
  }
  if (!std::all_of(index.begin(), index.end(), [](char c) { return c >= '0' && c <= '9'; }))
    return std::nullopt;
  const std::optional<std::string> near = kind == "cpu" || kind == "cuda" ? kind
                                          : kind == "gpu"                 ? "cuda"
                                                          : nearest(kind, {"cpu", "cuda"});
  if (!near) return std::nullopt;
  const std::string suggestion = index.empty() ? *near : *near + ":" + index;
  if (suggestion == item) return std::nullopt;
  return suggestion;
}

}  // namespace dprun::cli
