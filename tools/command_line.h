#pragma once
// The command line's parser. Each command declares its options on a CLI11 app, each bound to a
// field of the command's own options struct, with its value name and help in the same call;
// parse_command_line fills the struct, and the command runs from the struct alone. Help is
// generated from the declarations (command_help); every mistake becomes a one-line
// UsageError (exit status 2).
#include <CLI/CLI.hpp>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "tools/usage_error.h"

namespace dprun::cli {

/// The app of one command. `usage` opens its help ("usage: dprun bench MODEL.onnx [options]"
/// and a line of what it does); `footer`, when given, closes it. The app takes no -h/--help of
/// its own: main() answers --help anywhere on the line before any parsing.
std::unique_ptr<CLI::App> command_app(const std::string& usage, const std::string& footer = "");

/// The positional MODEL.onnx every command but conformance and ops takes, required.
CLI::Option* add_model_path(CLI::App& app, std::string& path);

/// A flag (no value).
CLI::Option* add_flag(CLI::App& app, const std::string& name, bool& field, const std::string& help);

/// An option of one text value; `value_name` is its placeholder in the help ("LIST").
CLI::Option* add_text(CLI::App& app, const std::string& name, const std::string& value_name,
                      std::optional<std::string>& field, const std::string& help);
/// A repeatable option: each occurrence adds one value.
CLI::Option* add_texts(CLI::App& app, const std::string& name, const std::string& value_name,
                       std::vector<std::string>& field, const std::string& help);

/// A whole number in [min, max]: "--batch must be an integer, got 'x'", "--batch must be
/// between 1 and 64, got 0".
CLI::Option* add_integer(CLI::App& app, const std::string& name, const std::string& value_name,
                         std::optional<int64_t>& field, int64_t min, int64_t max,
                         const std::string& help);

/// What a number option admits, and so what its error says ("--lr must be a number >= 0,
/// got 'x'").
enum class NumberRule { Finite, NonNegative, Positive };
CLI::Option* add_number(CLI::App& app, const std::string& name, const std::string& value_name,
                        std::optional<double>& field, NumberRule rule, const std::string& help);

/// Parses argv[first..] into the fields `app`'s options are bound to. Throws UsageError for
/// any mistake, in one line: "unknown option '--devcies' (did you mean --devices?)", "option
/// '--batch' needs a value", "--shuffle excludes --no-shuffle", "expected one model file".
void parse_command_line(CLI::App& app, int argc, char** argv, int first);

/// The help `app`'s declarations generate: its usage, then each group of options ("options:",
/// "distributed (...):") with their help wrapped at 100 columns, then its footer.
std::string command_help(const CLI::App& app);

}  // namespace dprun::cli
