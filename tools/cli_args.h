#pragma once
// A small command-line parser: --name value, --name=value, repeated options and positionals.
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "engine/error.h"

namespace dprun::cli {

/// A mistake in how the command was called; the CLI exits with status 2.
class UsageError : public Error {
 public:
  using Error::Error;
};

struct OptionSpec {
  std::string name;  // without dashes
  bool takes_value = true;
  bool repeatable = false;
};

class Args {
 public:
  /// Parses argv[first..]; throws UsageError for unknown options or missing values.
  Args(int argc, char** argv, int first, const std::vector<OptionSpec>& specs);

  const std::vector<std::string>& positionals() const { return positionals_; }
  bool has(const std::string& name) const { return values_.count(name) != 0; }
  std::optional<std::string> get(const std::string& name) const;
  std::vector<std::string> all(const std::string& name) const;
  /// Integer option with bounds; throws UsageError naming the option when malformed.
  int64_t get_int(const std::string& name, int64_t fallback, int64_t min, int64_t max) const;

 private:
  std::vector<std::string> positionals_;
  std::map<std::string, std::vector<std::string>> values_;
};

/// Parses "NAME=VALUE"; throws UsageError mentioning `option` when there is no '='.
std::pair<std::string, std::string> split_assignment(const std::string& text,
                                                     const std::string& option);
/// Parses a whole decimal integer; throws UsageError naming `what` otherwise.
int64_t parse_int(const std::string& text, const std::string& what);

}  // namespace dprun::cli
