#pragma once
// Runs the dprun executable and captures its exit status and combined output.
#include <unistd.h>

#include <filesystem>
#include <string>

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

}  // namespace dprun::testing
