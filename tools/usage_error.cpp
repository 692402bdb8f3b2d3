#include "tools/usage_error.h"

#include <charconv>

namespace dprun::cli {

int64_t parse_int(const std::string& text, const std::string& what) {
  int64_t v = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size())
    throw UsageError(what + " must be an integer, got '" + text + "'");
  return v;
}

std::pair<std::string, std::string> split_assignment(const std::string& text,
                                                     const std::string& option) {
  size_t eq = text.find('=');
  if (eq == std::string::npos || eq == 0)
    throw UsageError("--" + option + " expects NAME=VALUE, got '" + text + "'");
  return {text.substr(0, eq), text.substr(eq + 1)};
}

}  // namespace dprun::cli
