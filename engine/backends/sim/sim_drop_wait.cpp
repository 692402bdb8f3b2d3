#include "engine/backends/sim/sim_drop_wait.h"

#include <cstdlib>

namespace dprun {

bool sim_wait_dropped(std::string_view kind) {
  const char* value = std::getenv("DPRUN_SIM_DROP_WAIT");
  if (value == nullptr) return false;
  std::string_view rest = value;
  while (!rest.empty()) {
    const size_t comma = rest.find(',');
    if (rest.substr(0, comma) == kind) return true;
    if (comma == std::string_view::npos) break;
    rest.remove_prefix(comma + 1);
  }
  return false;
}

}  // namespace dprun
