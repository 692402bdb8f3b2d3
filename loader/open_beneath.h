#pragma once
// Opening a file beneath a folder so that no symbolic link, `..` or mount point in the path can
// lead outside it, even one swapped in after the path was checked.
#include <string>

namespace dprun {

/// How open_beneath resolves the path: the kernel's openat2(RESOLVE_BENEATH |
/// RESOLVE_NO_SYMLINKS), or a walk that opens one component at a time with O_NOFOLLOW.
/// `automatic` takes openat2 and falls back to the walk where the kernel lacks it (ENOSYS,
/// before Linux 5.6, or a seccomp filter that refuses it so).
enum class BeneathMethod { automatic, openat2, component_walk };

/// An open file descriptor, closed when the owner goes; -1 when empty.
class FileDescriptor {
 public:
  FileDescriptor() = default;
  explicit FileDescriptor(int fd) : fd_(fd) {}
  FileDescriptor(FileDescriptor&& other) noexcept : fd_(other.release()) {}
  FileDescriptor& operator=(FileDescriptor&& other) noexcept;
  FileDescriptor(const FileDescriptor&) = delete;
  FileDescriptor& operator=(const FileDescriptor&) = delete;
  ~FileDescriptor();

  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  int release() {
    const int fd = fd_;
    fd_ = -1;
    return fd;
  }

 private:
  int fd_ = -1;
};

/// Opens `relative` read-only beneath the folder `folder`. `relative` must name the file by
/// its real path from `folder`: every component a plain name, none of them a symbolic link
/// (a link found on the way is refused, inside the folder or not). The file is opened
/// non-blocking, so a FIFO cannot stall the caller; the caller checks what it opened.
/// Returns the descriptor, or an empty one with errno set (ELOOP or EXDEV for a link or a
/// path leading out, ENOENT, EACCES, ...).
FileDescriptor open_beneath(const std::string& folder, const std::string& relative,
                            BeneathMethod method = BeneathMethod::automatic);

}  // namespace dprun
