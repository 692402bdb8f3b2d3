#pragma once
// Text helpers for CLI output.
#include <sstream>
#include <string>
#include <vector>

#include "engine/atomic_file.h"
#include "engine/tensor.h"

namespace dprun::cli {

/// The first `count` values of a tensor, e.g. "[0.12, -1.5, 3, ...]"; strings as JSON
/// literals, e.g. "[\"a\", \"b\"]".
std::string preview_values(const Tensor& tensor, int64_t count = 6);
/// An output name made safe as a file name: characters outside [A-Za-z0-9._-] become '_'.
std::string safe_file_name(const std::string& name);
/// JSON string literal with escapes.
std::string json_string(const std::string& text);
/// JSON array of numbers, each with 9 significant digits: "[1, 2.5]".
template <class T>
std::string json_list(const std::vector<T>& values) {
  std::ostringstream out;
  out.precision(9);
  out << "[";
  for (size_t i = 0; i < values.size(); ++i) out << (i ? ", " : "") << values[i];
  return out.str() + "]";
}

/// Fails (Error naming `--option` and `path`) unless `path` can be written before any work is
/// done: not a folder, in a folder that exists and is writable.
void check_writable(const std::string& path, const char* option);

}  // namespace dprun::cli
