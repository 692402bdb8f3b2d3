// dprun: run ONNX models data-parallel from the shell.
#include <cstdio>
#include <cstring>
#include <exception>
#include <optional>
#include <string>

#include "tools/commands.h"
#include "tools/distributed_cli.h"
#include "tools/usage_error.h"

namespace {

const char* kOverview =
    R"(dprun - data-parallel ONNX execution engine

usage:
  dprun MODEL.onnx [options]          run a model data-parallel (generated inputs unless --input)
  dprun run MODEL.onnx [options]      the same
  dprun bench MODEL.onnx [options]    measure throughput (samples/s) over the devices
  dprun train MODEL.onnx [options]    train data-parallel from .npy files, save to ONNX
  dprun inspect MODEL.onnx            inputs, outputs, opsets, op histogram, parameters
  dprun convert MODEL.onnx --save OUT.onnx
                                      the inference form of a model exported for training
  dprun conformance [options]         run the ONNX backend conformance suite
  dprun ops [--markdown]              every op this build knows: opsets, dtypes, devices,
                                      gradient, 16-bit policy
  dprun --version                     the version of dprun

  dprun COMMAND --help                the options of one command
  multi-process runs: mpirun -np N dprun COMMAND ... --distributed (see run, bench, train --help)

exit status: 0 success, 1 runtime error, 2 usage error
)";

// A command: its name, what runs it, and its help.
struct Command {
  const char* name;
  int (*run)(int argc, char** argv, int first);
  std::string (*help)();
};

constexpr Command kCommands[] = {
    {"run", dprun::cli::run_command, dprun::cli::run_help},
    {"bench", dprun::cli::bench_command, dprun::cli::bench_help},
    {"train", dprun::cli::train_command, dprun::cli::train_help},
    {"inspect", dprun::cli::inspect_command, dprun::cli::inspect_help},
    {"convert", dprun::cli::convert_command, dprun::cli::convert_help},
    {"conformance", dprun::cli::conformance_command, dprun::cli::conformance_help},
    {"ops", dprun::cli::ops_command, dprun::cli::ops_help},
};

const Command* command_named(const std::string& name) {
  for (const Command& c : kCommands)
    if (name == c.name) return &c;
  return nullptr;
}

// The help of `command` ("" for the overview); nullopt for a name that is no command.
std::optional<std::string> help_text(const std::string& command) {
  if (command.empty()) return std::string(kOverview);
  if (const Command* c = command_named(command)) return c->help();
  return std::nullopt;
}

bool is_help_flag(const char* arg) {
  return std::strcmp(arg, "--help") == 0 || std::strcmp(arg, "-h") == 0;
}

// `dprun --help`, `dprun help [COMMAND]`, `dprun COMMAND ... --help` (a model without a
// command is run's); nullopt when no help was asked for.
std::optional<std::string> requested_help(int argc, char** argv) {
  const std::string first = argv[1];
  if (first == "help") {
    if (argc < 3) return help_text("");
    if (auto text = help_text(argv[2])) return text;
    throw dprun::cli::UsageError("help: '" + std::string(argv[2]) + "' is not a command");
  }
  if (is_help_flag(argv[1])) return help_text("");
  for (int i = 2; i < argc; ++i)
    if (is_help_flag(argv[i])) return help_text(command_named(first) ? first : "run");
  return std::nullopt;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace dprun::cli;
  try {
    if (argc < 2) {
      std::fputs(kOverview, stderr);
      return 2;
    }
    std::string first = argv[1];
    if (first == "--version" || first == "version") {
      std::printf("dprun %s\n", DPRUN_VERSION);
      return 0;
    }
    if (auto help = requested_help(argc, argv)) {
      std::fputs(help->c_str(), stdout);
      return 0;
    }
    if (const Command* command = command_named(first)) return command->run(argc, argv, 2);
    return run_command(argc, argv, 1);
  } catch (const UsageError& e) {
    return report_error(e, 2);
  } catch (const std::exception& e) {
    return report_error(e, 1);
  }
}
