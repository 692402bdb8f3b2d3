#include "engine/env_flag.h"

#include <cstdlib>
#include <cstring>

namespace dprun {

bool env_flag(const char* name) {
  const char* value = std::getenv(name);
  return value != nullptr && std::strcmp(value, "1") == 0;
}

}  // namespace dprun
