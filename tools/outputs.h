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

}  // namespace dprun::cli
