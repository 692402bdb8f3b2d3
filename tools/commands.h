#pragma once
// The dprun subcommands. Each returns the process exit status; errors propagate as
// UsageError (status 2) or Error (status 1) to main.

namespace dprun::cli {

int run_command(int argc, char** argv, int first);
int inspect_command(int argc, char** argv, int first);
int conformance_command(int argc, char** argv, int first);
int bench_command(int argc, char** argv, int first);
int train_command(int argc, char** argv, int first);
int convert_command(int argc, char** argv, int first);
int ops_command(int argc, char** argv, int first);

}  // namespace dprun::cli
