#pragma once
// numpy .npy files (format versions 1.0, 2.0 and 3.0, C order) <-> Tensor.
#include <optional>
#include <string>

#include "engine/tensor.h"

namespace dprun {

/// Reads a .npy file into a CPU tensor. Numbers and bools of every width numpy writes are
/// read as they are. numpy's fixed-width strings become String tensors: '|S<n>' bytes as
/// they are, '<U<n>' (and big-endian '>U<n>') UTF-32 converted to UTF-8; trailing NULs are
/// dropped from each element, as numpy does. Raw 2-byte void data ('V2', how ml_dtypes'
/// bfloat16 arrays are saved) is read as its uint16 bits. Throws Error naming the file for a
/// missing file, a bad magic/header, Fortran order, an unsupported dtype, other big-endian
/// data, a code point that is not a Unicode character, or a short payload.
Tensor read_npy(const std::string& path);
/// read_npy without reading the data: numbers are a read-only view of the file's pages
/// (engine/mapped_file.h), read as they are touched, so a file larger than memory can be used
/// row by row; the file must not change while the tensor lives. nullopt for what cannot be
/// viewed in place (strings, numbers whose offset in the file does not suit their type, no
/// elements, a header that cannot be read): read_npy reads those. Throws read_npy's errors
/// for a missing file, a bad header or a short payload.
std::optional<Tensor> map_npy(const std::string& path);
/// The shape in the header of the .npy file at `path`, without reading its data; nullopt when
/// the file cannot be read or its header is not a .npy header (read_npy then says why).
std::optional<Shape> read_npy_shape(const std::string& path);
/// Parses .npy bytes held in memory; `what` names the source in error messages.
Tensor parse_npy(const std::string& bytes, const std::string& what);
/// Writes `tensor` as a version 1.0 .npy file. bfloat16, which numpy lacks, is written as
/// float32. String tensors are written as numpy writes str arrays, '<U<n>' with n the longest
/// element in code points, or as '|S<n>' bytes when an element is not valid UTF-8; as in
/// numpy, trailing NULs of an element do not survive. Writes to a temporary file and renames
/// it, so no half-written file remains.
void write_npy(const Tensor& tensor, const std::string& path);
/// The .npy bytes of `tensor`.
std::string serialize_npy(const Tensor& tensor);

}  // namespace dprun
