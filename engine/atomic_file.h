#pragma once
// Crash-safe file replacement: a reader of `path` sees the old file or the new one, whole,
// whatever happens to the writing process.
#include <string>
#include <string_view>

namespace dprun {

/// Writes `contents` to `path`: into a temporary file of a name unique to this call, in the
/// same folder (".NAME.XXXXXX"), synced to disk, renamed over `path`, then the folder synced
/// so the rename itself is durable. Two processes writing one path each leave one whole file.
/// On failure the temporary file is removed, `path` is untouched, and Error names `path`
/// and the reason.
void write_file_atomically(const std::string& path, std::string_view contents);

}  // namespace dprun
