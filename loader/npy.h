#pragma once
// numpy .npy files (format versions 1.0, 2.0 and 3.0, C order) <-> Tensor.
#include <string>

#include "engine/tensor.h"

namespace dprun {

/// Reads a .npy file into a CPU tensor. Throws Error naming the file for a missing file, a bad
/// magic/header, Fortran order, an unsupported dtype, big-endian data or a short payload.
Tensor read_npy(const std::string& path);
/// Parses .npy bytes held in memory; `what` names the source in error messages.
Tensor parse_npy(const std::string& bytes, const std::string& what);
/// Writes `tensor` as a version 1.0 .npy file (bfloat16, which numpy lacks, is written as
/// float32). Writes to a temporary file and renames it, so no half-written file remains.
void write_npy(const Tensor& tensor, const std::string& path);
/// The .npy bytes of `tensor`.
std::string serialize_npy(const Tensor& tensor);

}  // namespace dprun
