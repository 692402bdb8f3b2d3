#include "engine/warning.h"

#include <cstdio>
#include <mutex>
#include <set>

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
std::mutex& once_mutex() {
  static std::mutex m;
  return m;
}
std::set<std::string>& once_keys() {
  static std::set<std::string> keys;
  return keys;
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

void warn_once(const std::string& key, const std::string& message) {
  {
    std::lock_guard lock(once_mutex());
    if (!once_keys().insert(key).second) return;
  }
  warn(message);
}

void reset_warn_once() {
  std::lock_guard lock(once_mutex());
  once_keys().clear();
}

}  // namespace dprun
