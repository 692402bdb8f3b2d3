#pragma once
// Command-line options shared by `dprun run` and `dprun bench`: devices, split rules, inputs.
#include <optional>
#include <string>
#include <vector>

#include "engine/model.h"
#include "engine/parallel/data_parallel.h"
#include "tools/cli_args.h"
#include "tools/inputs.h"

namespace dprun::cli {

/// The option specs these helpers read.
std::vector<OptionSpec> parallel_option_specs();
/// Builds DataParallel options from --devices, --dim, --output-device, --split,
/// --split-policy, --weights and --threads. Throws UsageError for malformed values, and
/// Error for a well-formed device that cannot be used (cuda:N without CUDA or without a GPU).
DataParallelOptions parse_parallel_options(const Args& args);
/// Builds the model's compile options from --allow-tf32, --allow-winograd and, for the
/// commands that take it (run, bench), --precision.
ModelOptions parse_model_options(const Args& args);
/// --precision: float32, float16 or bfloat16 (run, bench, train and conformance take it);
/// nullopt without it. Throws UsageError naming any other value.
std::optional<DType> parse_precision(const Args& args);
/// Builds input options from --batch, --symbol and --input.
InputOptions parse_input_options(const Args& args);

}  // namespace dprun::cli
