#pragma once
// Starting dprun under mpirun from a test: the launcher, its flags and environment come from
// CMake (DPRUN_MPIEXEC, DPRUN_MPIEXEC_FLAGS, DPRUN_MPIEXEC_ENV), so the tests run the same as
// root in a CI container and as a user.
#include <sys/types.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <vector>

#include "../command_util.h"

namespace dprun::testing {

/// Runs `command` with sh, stdin from /dev/null, killed after `timeout_s` seconds.
inline CommandResult run_command(const std::string& command, int timeout_s = 180) {
  return run_shell("timeout -k 10 " + std::to_string(timeout_s) + " " + command + " </dev/null");
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

/// The whole text of the file at `path` (empty when it cannot be read).
inline std::string read_text(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

/// An empty folder of the temporary directory for this process: dprun_mpi_NAME_PID.
inline std::filesystem::path scratch(const std::string& name) {
  std::filesystem::path dir = std::filesystem::temp_directory_path() /
                              ("dprun_mpi_" + name + "_" + std::to_string(getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

/// The processes whose environment holds `marker` ("NAME=VALUE") and names MPI rank `rank`.
inline std::vector<pid_t> processes_of_rank(const std::string& marker, int rank) {
  std::vector<pid_t> found;
  std::string rank_var = "OMPI_COMM_WORLD_RANK=" + std::to_string(rank);
  std::string pmi_var = "PMI_RANK=" + std::to_string(rank);
  for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
    std::string pid = entry.path().filename().string();
    if (pid.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream in(entry.path() / "environ", std::ios::binary);
    std::string env((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    bool has_marker = false, has_rank = false;
    for (size_t at = 0; at < env.size();) {
      size_t end = env.find('\0', at);
      if (end == std::string::npos) end = env.size();
      std::string var = env.substr(at, end - at);
      has_marker |= var == marker;
      has_rank |= var == rank_var || var == pmi_var;
      at = end + 1;
    }
    if (has_marker && has_rank) found.push_back(static_cast<pid_t>(std::stoi(pid)));
  }
  return found;
}

}  // namespace dprun::testing
