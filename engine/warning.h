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
/// Emits `message` the first time this process sees `key`; later calls with the same key do
/// nothing (PyTorch shows such a warning once). Thread-safe.
void warn_once(const std::string& key, const std::string& message);
/// Forgets every key warn_once() has seen, so each of those warnings is given once more.
/// Meant for tests that count warnings.
void reset_warn_once();

}  // namespace dprun
