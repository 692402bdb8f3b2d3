#pragma once
// Warnings: printed to stderr by default; applications may route them elsewhere.
#include <functional>
#include <string>

namespace dprun {

using WarningHandler = std::function<void(const std::string&)>;

/// Replaces the warning handler; returns the previous one. Thread-safe.
WarningHandler set_warning_handler(WarningHandler handler);
/// Emits a warning through the current handler.
void warn(const std::string& message);

}  // namespace dprun
