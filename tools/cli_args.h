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
  /// Parses argv[first..]; throws UsageError for unknown options (suggesting the nearest valid
  /// one: "unknown option '--device' (did you mean --devices?)") or missing values.
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

/// The number of single-character insertions, deletions, substitutions and swaps of two
/// neighbours that turn `a` into `b` (optimal string alignment distance).
size_t edit_distance(const std::string& a, const std::string& b);
/// The candidate closest to `word` by edit_distance, if it is close enough to be a likely typo
/// (at most 2 edits, and fewer than half of `word`'s characters); ties go to the first listed.
std::optional<std::string> nearest(const std::string& word,
                                   const std::vector<std::string>& candidates);
/// For a --devices item that does not parse, a device the user likely meant ("cude:0" ->
/// "cuda:0", "cpu:O" -> "cpu:0"), or nullopt when none is close.
std::optional<std::string> suggest_device(const std::string& item);

}  // namespace dprun::cli
