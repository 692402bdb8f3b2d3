#include "tools/report_files.h"

#include <unistd.h>

#include <filesystem>

#include "engine/atomic_file.h"
#include "engine/error.h"

namespace dprun {

void to_json(JsonReport& out, const Device& device) {
  out = device.to_string();
}

}  // namespace dprun

namespace dprun::cli {

void write_json_report(const std::string& path, const JsonReport& report) {
  // A name that is not UTF-8 (a model's output, a path) is written with U+FFFD in place of the
  // bytes that are not, rather than failing the run after its work is done.
  write_file_atomically(path,
                        report.dump(2, ' ', false, JsonReport::error_handler_t::replace) + "\n");
}

void check_writable(const std::string& path, const char* option) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec))
    fail("--", option, " ", path, ": is a folder; give the file to write");
  auto dir = std::filesystem::path(path).parent_path();
  if (dir.empty()) dir = ".";
  if (!std::filesystem::is_directory(dir, ec) || access(dir.c_str(), W_OK) != 0)
    fail("--", option, " ", path, ": the folder ", dir.string(),
         " does not exist or is not writable");
}

}  // namespace dprun::cli
