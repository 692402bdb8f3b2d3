#pragma once
// The dprun subcommands. Each parses its options (CLI11, tools/command_line.h) and returns the
// process exit status; errors propagate as UsageError (status 2) or Error (status 1) to main.
// Each has its help, generated from the same declarations.
#include <string>

namespace dprun::cli {

int run_command(int argc, char** argv, int first);
int inspect_command(int argc, char** argv, int first);
int conformance_command(int argc, char** argv, int first);
int bench_command(int argc, char** argv, int first);
int train_command(int argc, char** argv, int first);
int convert_command(int argc, char** argv, int first);
int ops_command(int argc, char** argv, int first);

std::string run_help();
std::string inspect_help();
std::string conformance_help();
std::string bench_help();
std::string train_help();
std::string convert_help();
std::string ops_help();

/// The last line of the help of the commands that take simulated devices.
inline constexpr const char* kTestingAids = "testing aids (simulated sim:N devices): see docs/";

}  // namespace dprun::cli
