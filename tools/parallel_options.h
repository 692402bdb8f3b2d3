#pragma once
// Command-line options shared by `dprun run`, `bench` and `train`: devices, split rules,
// inputs, precision.
#include <optional>
#include <string>
#include <vector>

#include "engine/model.h"
#include "engine/parallel/data_parallel.h"
#include "tools/command_line.h"
#include "tools/inputs.h"
#include "tools/transform_flags.h"

namespace dprun::cli {

/// Where a model runs and how its inputs are split, as given on the command line.
struct DeviceFlags {
  std::optional<std::string> devices, output_device, split_policy, weights;
  std::optional<int64_t> dim, threads;
  std::vector<std::string> splits;
  bool allow_tf32 = false, allow_winograd = false;
};

/// The inputs of `run` and `bench`: files and the sizes of generated ones.
struct InputFlags {
  std::vector<std::string> files, symbols;
  std::optional<int64_t> batch;
  TransformFlags transforms;  // --layout and --normalize
};

/// Declares --devices, --dim, --output-device, --split, --split-policy, --weights, --threads,
/// --allow-tf32 and --allow-winograd.
void add_device_options(CLI::App& app, DeviceFlags& flags);
/// Declares --input, --batch, --symbol, --layout and --normalize as run and bench take them.
void add_input_options(CLI::App& app, InputFlags& flags);
/// --precision's help for run, bench and inspect, which convert the model itself.
inline constexpr const char* kConvertPrecisionHelp =
    "float32 (default) | float16 | bfloat16: convert the model's parameters and activations to "
    "16 bits before compiling (inputs and outputs stay float32; a few ops such as Resize and "
    "Range stay float32)";

/// Declares --precision with `help` (each command converts the model in its own way).
CLI::Option* add_precision_option(CLI::App& app, std::optional<std::string>& field,
                                  const std::string& help);

/// DataParallel options from the device flags. Throws UsageError for malformed values, and
/// Error for a well-formed device that cannot be used (cuda:N without CUDA or without a GPU).
DataParallelOptions parallel_options(const DeviceFlags& flags);
/// The model's compile options from --allow-tf32, --allow-winograd and --precision.
ModelOptions model_options(const DeviceFlags& flags, const std::optional<std::string>& precision);
/// --precision: float32, float16 or bfloat16; nullopt without it. Throws UsageError naming any
/// other value.
std::optional<DType> precision_of(const std::optional<std::string>& precision);
/// Input options from --batch, --symbol, --input, --layout and --normalize.
InputOptions input_options(const InputFlags& flags);

}  // namespace dprun::cli
