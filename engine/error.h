#pragma once
// The one exception type of the project. Messages carry their context, e.g.
// "[Conv] node 'conv1': weight must be 4-D, got shape [3, 3]".
#include <exception>
#include <sstream>
#include <stdexcept>
#include <string>

namespace dprun {

/// Every error dprun raises. The CLI prints what() on one line and exits non-zero.
class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : std::runtime_error(message) {}
};

namespace detail {
template <class... Args>
std::string concat(const Args&... args) {
  std::ostringstream out;
  (out << ... << args);
  return out.str();
}
}  // namespace detail

/// Throws Error with the streamed arguments as message.
template <class... Args>
[[noreturn]] void fail(const Args&... args) {
  throw Error(detail::concat(args...));
}

/// The message of `error`: what() of a std::exception, a fixed text for anything else, and
/// "" for no error.
inline std::string error_message(const std::exception_ptr& error) {
  if (!error) return "";
  try {
    std::rethrow_exception(error);
  } catch (const std::exception& e) {
    return e.what();
  } catch (...) {
    return "unknown exception (not derived from std::exception)";
  }
}

}  // namespace dprun

/// Throws dprun::Error with the streamed message when cond is false.
#define DPRUN_CHECK(cond, ...)               \
  do {                                       \
    if (!(cond)) ::dprun::fail(__VA_ARGS__); \
  } while (0)
