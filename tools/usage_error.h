#pragma once
// How the command line reports a mistake in how it was called, and the value forms options share.
#include <cstdint>
#include <string>
#include <utility>

#include "engine/error.h"

namespace dprun::cli {

/// A mistake in how the command was called; the CLI exits with status 2.
class UsageError : public Error {
 public:
  using Error::Error;
};

/// Parses "NAME=VALUE"; throws UsageError mentioning `option` when there is no '='.
std::pair<std::string, std::string> split_assignment(const std::string& text,
                                                     const std::string& option);
/// Parses a whole decimal integer; throws UsageError naming `what` otherwise.
int64_t parse_int(const std::string& text, const std::string& what);

}  // namespace dprun::cli
