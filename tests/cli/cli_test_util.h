#pragma once
// Runs the dprun executable and captures its exit status and combined output.
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <string>

namespace dprun::testing {

struct CommandResult {
  int status = -1;
  std::string output;  // stdout and stderr together
};

inline CommandResult run_dprun(const std::string& arguments) {
  std::string command = std::string(DPRUN_BINARY) + " " + arguments + " 2>&1";
  CommandResult result;
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return result;
  std::array<char, 4096> buffer;
  size_t n;
  while ((n = fread(buffer.data(), 1, buffer.size(), pipe)) > 0)
    result.output.append(buffer.data(), n);
  int raw = pclose(pipe);
  result.status = WIFEXITED(raw) ? WEXITSTATUS(raw) : 128 + WTERMSIG(raw);
  return result;
}

inline std::string source_path(const std::string& relative) {
  return std::string(DPRUN_SOURCE_DIR) + "/" + relative;
}

/// A path in the temporary folder that no other test process uses at the same time (other
/// checkouts of the project may run the same tests concurrently): NAME_PID.
inline std::filesystem::path scratch_path(const std::string& name) {
  return std::filesystem::temp_directory_path() / (name + "_" + std::to_string(getpid()));
}

}  // namespace dprun::testing
