#pragma once
// Running a command from a test: its exit status and its output, stdout and stderr together,
// and reading the JSON reports it writes. Shared by the command-line and the MPI tests.
#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <optional>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

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

/// The numbers of the list `"key": [...]` in the JSON `text`, as dprun writes them; nullopt
/// when `text` has no such list.
inline std::optional<std::vector<double>> json_numbers(const std::string& text,
                                                       const std::string& key) {
  std::smatch m;
  if (!std::regex_search(text, m, std::regex("\"" + key + "\": \\[([^\\]]*)\\]")))
    return std::nullopt;
  std::vector<double> out;
  std::stringstream list(m[1].str());
  for (std::string item; std::getline(list, item, ',');) out.push_back(std::stod(item));
  return out;
}

}  // namespace dprun::testing
