#pragma once
// A run's outputs on the command line: one line each, and a .npy file each with --output-dir.
#include <string>
#include <vector>

#include "engine/tensor.h"

namespace dprun::cli {

/// Prints "  output NAME DESCRIPTION [values...]" for every output and, when `output_dir` is
/// not empty, creates it and writes each output to OUTPUT_DIR/NAME.npy (the name made safe).
void report_outputs(const std::vector<std::string>& names, const std::vector<Tensor>& outputs,
                    const std::string& output_dir);

/// The first `count` values of a tensor, e.g. "[0.12, -1.5, 3, ...]"; strings as JSON
/// literals, e.g. "[\"a\", \"b\"]".
std::string preview_values(const Tensor& tensor, int64_t count = 6);
/// An output name made safe as a file name: characters outside [A-Za-z0-9._-] become '_'.
std::string safe_file_name(const std::string& name);

}  // namespace dprun::cli
