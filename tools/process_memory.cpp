#include "tools/process_memory.h"

#include <unistd.h>

#include <fstream>
#include <sstream>
#include <string>

namespace dprun::cli {

int64_t resident_bytes() {
  std::ifstream statm("/proc/self/statm");
  int64_t size = 0, resident = 0;
  if (!(statm >> size >> resident)) return 0;
  return resident * static_cast<int64_t>(sysconf(_SC_PAGESIZE));
}

int64_t peak_resident_bytes() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmHWM:", 0) != 0) continue;
    std::istringstream fields(line.substr(6));
    int64_t kib = 0;
    return fields >> kib ? kib * 1024 : 0;
  }
  return 0;
}

}  // namespace dprun::cli
