#pragma once
// Starting dprun under mpirun from a test: the launcher, its flags and environment come from
// CMake (DPRUN_MPIEXEC, DPRUN_MPIEXEC_FLAGS, DPRUN_MPIEXEC_ENV), so the tests run the same as
// root in a CI container and as a user.
#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <string>

namespace dprun::testing {

struct CommandResult {
  int status = -1;
  std::string output;  // stdout and stderr together
};

/// Runs `command` with sh, stdin from /dev/null, killed after `timeout_s` seconds.
inline CommandResult run_command(const std::string& command, int timeout_s = 180) {
  std::string line =
      "timeout -k 10 " + std::to_string(timeout_s) + " " + command + " </dev/null 2>&1";
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

/// "ENV mpiexec -n N FLAGS": the start of a command line that runs N ranks.
inline std::string mpirun(int ranks) {
  return std::string(DPRUN_MPIEXEC_ENV) + " " + DPRUN_MPIEXEC + " " + std::to_string(ranks) + " " +
         DPRUN_MPIEXEC_FLAGS;
}

/// mpirun(ranks) running the dprun executable with `arguments`.
inline CommandResult run_ranks(int ranks, const std::string& arguments, int timeout_s = 180) {
  return run_command(mpirun(ranks) + " " + DPRUN_BINARY + " " + arguments, timeout_s);
}

inline CommandResult run_dprun(const std::string& arguments) {
  return run_command(std::string(DPRUN_BINARY) + " " + arguments);
}

inline std::string source_path(const std::string& relative) {
  return std::string(DPRUN_SOURCE_DIR) + "/" + relative;
}

}  // namespace dprun::testing
