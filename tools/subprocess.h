#pragma once
// Running another program and waiting for it.
#include <string>
#include <vector>

namespace dprun::cli {

struct ProcessResult {
  int status = -1;     // exit status; 128 + signal number when killed by a signal
  std::string output;  // stdout and stderr together
};

/// Runs `program` with `arguments` (no shell: each is passed as one argv element), with
/// stdout and stderr sent to `log_path`, and waits for it. Returns its status and the log's
/// contents. Throws Error when it cannot be started.
ProcessResult run_process(const std::string& program, const std::vector<std::string>& arguments,
                          const std::string& log_path);

}  // namespace dprun::cli
