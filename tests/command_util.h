#pragma once
// Running a command from a test: its exit status and its output, stdout and stderr together,
// and reading the JSON reports it writes (parsed with nlohmann/json). Shared by the command-line
// and the MPI tests.
#include <sys/wait.h>

#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
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

/// The JSON document in the file at `path`. A file that cannot be read or does not parse fails
/// the running test (ADD_FAILURE, naming the file and the parser's error) and gives a null json:
/// it contains no key, so the caller's own checks fail as well rather than crash (at() on it
/// throws, which fails the test too). The reports are read by their keys and values only, never
/// by their layout: dprun may write them on one line or indented, with any number of digits.
inline nlohmann::json read_json(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    ADD_FAILURE() << path.string() << ": cannot be read";
    return nullptr;
  }
  try {
    return nlohmann::json::parse(in);
  } catch (const nlohmann::json::parse_error& e) {
    ADD_FAILURE() << path.string() << ": not JSON: " << e.what();
    return nullptr;
  }
}

/// The numbers of the array `report[key]`, in order; nullopt when `report` is not an object or
/// has no `key`. A null item (how the reports write a number that is not finite, such as the
/// norm of a float16 step that overflowed) reads as NaN. A `key` that is no array, or an item
/// that is neither a number nor null, fails the running test: the former gives nullopt, the
/// latter NaN.
inline std::optional<std::vector<double>> numbers(const nlohmann::json& report,
                                                  const std::string& key) {
  if (!report.is_object() || !report.contains(key)) return std::nullopt;
  const nlohmann::json& list = report.at(key);
  if (!list.is_array()) {
    ADD_FAILURE() << "\"" << key << "\" is no array: " << list.dump();
    return std::nullopt;
  }
  std::vector<double> out;
  for (const nlohmann::json& item : list) {
    if (item.is_number()) {
      out.push_back(item.get<double>());
    } else {
      if (!item.is_null()) ADD_FAILURE() << "\"" << key << "\" holds " << item.dump();
      out.push_back(NAN);
    }
  }
  return out;
}

}  // namespace dprun::testing
