#pragma once
// Host memory that is a read-only view of a file (mmap), for data sets larger than memory:
// its pages are read from the file when first touched and can be given back at any time
// (release_mapped_pages), after which touching them reads them again. Resident memory then
// holds what was touched since the last release, not the file.
#include <cstddef>
#include <memory>
#include <string>

#include "engine/tensor.h"

namespace dprun {

/// Storage of `bytes` bytes of the file at `path` from byte `offset`, mapped read-only (a write
/// stops the process). The file must not change while the storage lives. Throws Error "PATH:
/// cannot be opened" or "PATH: cannot be mapped: REASON", or when the file is shorter than
/// offset + bytes.
std::shared_ptr<Storage> map_file(const std::string& path, size_t offset, size_t bytes);

/// Gives back the resident pages of [data, data + bytes), which must lie in the storage of
/// map_file (never in other memory: its contents would be lost). Whole pages that hold any of
/// the range go; a later read maps them again from the file.
void release_mapped_pages(const void* data, size_t bytes);

}  // namespace dprun
