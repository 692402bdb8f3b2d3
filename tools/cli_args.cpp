#include "tools/cli_args.h"

#include <algorithm>
#include <charconv>

namespace dprun::cli {

namespace {

// "unknown option '--devcies' (did you mean --devices?)", or "(see --help)" when none is close.
UsageError unknown_option(const std::string& name, const std::vector<OptionSpec>& specs) {
  std::vector<std::string> names;
  for (const auto& s : specs) names.push_back(s.name);
  const auto close = nearest(name, names);
  return UsageError("unknown option '--" + name + "' (" +
                    (close ? "did you mean --" + *close + "?" : std::string("see --help")) + ")");
}

}  // namespace

Args::Args(int argc, char** argv, int first, const std::vector<OptionSpec>& specs) {
  for (int i = first; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg.size() < 3 || arg.rfind("--", 0) != 0) {
      if (arg.size() > 1 && arg[0] == '-' && arg != "-")
        throw UsageError("unknown option '" + arg + "' (see --help)");
      positionals_.push_back(arg);
      continue;
    }
    std::string name = arg.substr(2);
    std::optional<std::string> inline_value;
    if (size_t eq = name.find('='); eq != std::string::npos) {
      inline_value = name.substr(eq + 1);
      name = name.substr(0, eq);
    }
    const OptionSpec* spec = nullptr;
    for (const auto& s : specs)
      if (s.name == name) spec = &s;
    if (spec == nullptr) throw unknown_option(name, specs);
    std::string value;
    if (spec->takes_value) {
      if (inline_value) {
        value = *inline_value;
      } else {
        if (i + 1 >= argc) throw UsageError("option '--" + name + "' needs a value");
        value = argv[++i];
      }
    } else if (inline_value) {
      throw UsageError("option '--" + name + "' takes no value");
    }
    auto& slot = values_[name];
    if (!slot.empty() && !spec->repeatable)
      throw UsageError("option '--" + name + "' given more than once");
    slot.push_back(value);
  }
}

std::optional<std::string> Args::get(const std::string& name) const {
  auto it = values_.find(name);
  if (it == values_.end()) return std::nullopt;
  return it->second.back();
}

std::vector<std::string> Args::all(const std::string& name) const {
  auto it = values_.find(name);
  return it == values_.end() ? std::vector<std::string>{} : it->second;
}

int64_t parse_int(const std::string& text, const std::string& what) {
  int64_t v = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size())
    throw UsageError(what + " must be an integer, got '" + text + "'");
  return v;
}

int64_t Args::get_int(const std::string& name, int64_t fallback, int64_t min, int64_t max) const {
  auto v = get(name);
  if (!v) return fallback;
  int64_t n = parse_int(*v, "--" + name);
  if (n < min || n > max)
    throw UsageError("--" + name + " must be between " + std::to_string(min) + " and " +
                     std::to_string(max) + ", got " + *v);
  return n;
}

std::pair<std::string, std::string> split_assignment(const std::string& text,
                                                     const std::string& option) {
  size_t eq = text.find('=');
  if (eq == std::string::npos || eq == 0)
    throw UsageError("--" + option + " expects NAME=VALUE, got '" + text + "'");
  return {text.substr(0, eq), text.substr(eq + 1)};
}

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
