#pragma once
// Runs the dprun executable and captures its exit status and combined output.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <optional>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "../command_util.h"

namespace dprun::testing {

inline CommandResult run_dprun(const std::string& arguments) {
  return run_shell(std::string(DPRUN_BINARY) + " " + arguments);
}

/// A path in the temporary folder that no other test process uses at the same time (other
/// checkouts of the project may run the same tests concurrently): NAME_PID.
inline std::filesystem::path scratch_path(const std::string& name) {
  return std::filesystem::temp_directory_path() / (name + "_" + std::to_string(getpid()));
}

/// Expects `r` to be a usage error: status 2 and exactly "dprun: error: MESSAGE" on one line.
inline void expect_usage_error(const CommandResult& r, const std::string& message) {
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_EQ(r.output, "dprun: error: " + message + "\n");
}

/// The bytes of the file at `path` (empty when it cannot be read).
inline std::string read_text(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream read;
  read << in.rdbuf();
  return read.str();
}

}  // namespace dprun::testing
