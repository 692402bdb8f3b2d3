#include "engine/warning.h"

#include <cstdio>
#include <mutex>

namespace dprun {

namespace {
std::mutex& handler_mutex() {
  static std::mutex m;
  return m;
}
WarningHandler& current_handler() {
  static WarningHandler handler = [](const std::string& message) {
    std::fprintf(stderr, "dprun: warning: %s\n", message.c_str());
  };
  return handler;
}
}  // namespace

WarningHandler set_warning_handler(WarningHandler handler) {
  std::lock_guard lock(handler_mutex());
  WarningHandler previous = std::move(current_handler());
  current_handler() = std::move(handler);
  return previous;
}

void warn(const std::string& message) {
  WarningHandler handler;
  {
    std::lock_guard lock(handler_mutex());
    handler = current_handler();
  }
  if (handler) handler(message);
}

}  // namespace dprun
