#pragma once
// Running a command from a test: its exit status and its output, stdout and stderr together.
// Shared by the command-line and the MPI tests.
#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <string>

namespace dprun::testing {

struct CommandResult {
  int status = -1;     // the exit status, or 128 + the signal that ended it
  std::string output;  // stdout and stderr together
};

/// Runs `command` with sh, stderr joined to stdout, and waits for it.
inline CommandResult run_shell(const std::string& command) {
  const std::string line = command + " 2>&1";
  CommandResult result;
  FILE* pipe = popen(line.c_str(), "r");
  if (pipe == nullptr) return result;
  std::array<char, 4096> buffer;
  size_t n;
  while ((n = fread(buffer.data(), 1, buffer.size(), pipe)) > 0)
    result.output.append(buffer.data(), n);
  int raw = pclose(pipe);
  result.status = WIFEXITED(raw) ? WEXITSTATUS(raw) : 128 + WTERMSIG(raw);
  return result;
}

/// `relative` inside the source tree.
inline std::string source_path(const std::string& relative) {
  return std::string(DPRUN_SOURCE_DIR) + "/" + relative;
}

}  // namespace dprun::testing
