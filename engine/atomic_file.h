#pragma once
// Crash-safe file replacement: a reader of `path` sees the old file or the new one, whole,
// whatever happens to the writing process.
#include <cstdint>
#include <string>
#include <string_view>

namespace dprun {

/// A file written in pieces and put in place whole: the bytes go into a temporary file of a
/// name unique to this writer, in the same folder (".NAME.XXXXXX"), and commit() syncs it,
/// renames it over `path` and syncs the folder. A writer destroyed before commit() removes its
/// temporary file and leaves `path` untouched. Errors throw Error naming `path` and the reason.
class AtomicFileWriter {
 public:
  explicit AtomicFileWriter(std::string path);
  AtomicFileWriter(const AtomicFileWriter&) = delete;
  AtomicFileWriter& operator=(const AtomicFileWriter&) = delete;
  ~AtomicFileWriter();

  /// Appends `bytes`.
  void write(std::string_view bytes);
  /// Bytes written so far.
  uint64_t size() const { return size_; }
  /// Puts the file in place. Once only.
  void commit();

 private:
  [[noreturn]] void fail_with(int error);

  std::string path_;
  std::string temporary_;
  int fd_ = -1;
  uint64_t size_ = 0;
};

/// Writes `contents` to `path`: into a temporary file of a name unique to this call, in the
/// same folder (".NAME.XXXXXX"), synced to disk, renamed over `path`, then the folder synced
/// so the rename itself is durable. Two processes writing one path each leave one whole file.
/// On failure the temporary file is removed, `path` is untouched, and Error names `path`
/// and the reason.
void write_file_atomically(const std::string& path, std::string_view contents);

}  // namespace dprun
