#include "loader/open_beneath.h"

#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <sstream>
#include <vector>

namespace dprun {

FileDescriptor& FileDescriptor::operator=(FileDescriptor&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = other.release();
  }
  return *this;
}

FileDescriptor::~FileDescriptor() {
  if (fd_ >= 0) ::close(fd_);
}

namespace {

constexpr int kFileFlags = O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK;

// glibc 2.36 has no openat2 wrapper: the system call itself.
FileDescriptor open_by_openat2(int folder_fd, const std::string& relative) {
  open_how how{};
  how.flags = kFileFlags;
  how.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS;
  long fd;
  do {
    fd = ::syscall(SYS_openat2, folder_fd, relative.c_str(), &how, sizeof(how));
  } while (fd < 0 && errno == EAGAIN);  // a rename raced the lookup: the kernel asks to retry
  return FileDescriptor(static_cast<int>(fd));
}

// One component at a time, each opened relative to the last with O_NOFOLLOW, so neither a
// link nor ".." is ever followed.
FileDescriptor open_by_component_walk(int folder_fd, const std::string& relative) {
  std::vector<std::string> parts;
  std::istringstream in(relative);
  for (std::string part; std::getline(in, part, '/');)
    if (!part.empty() && part != ".") parts.push_back(part);
  if (parts.empty()) return FileDescriptor(::openat(folder_fd, ".", kFileFlags));
  for (const std::string& part : parts)
    if (part == "..") {
      errno = EXDEV;
      return {};
    }
  FileDescriptor current(::fcntl(folder_fd, F_DUPFD_CLOEXEC, 0));
  for (size_t i = 0; i + 1 < parts.size(); ++i) {
    // O_PATH | O_NOFOLLOW opens a link itself rather than failing, so that it is told apart
    // from a file that is not a folder.
    current =
        FileDescriptor(::openat(current.get(), parts[i].c_str(), O_PATH | O_NOFOLLOW | O_CLOEXEC));
    struct stat info {};
    if (!current.valid() || ::fstat(current.get(), &info) != 0) return {};
    if (!S_ISDIR(info.st_mode)) {
      errno = S_ISLNK(info.st_mode) ? ELOOP : ENOTDIR;
      return {};
    }
  }
  return FileDescriptor(::openat(current.get(), parts.back().c_str(), kFileFlags | O_NOFOLLOW));
}

}  // namespace

FileDescriptor open_beneath(const std::string& folder, const std::string& relative,
                            BeneathMethod method) {
  const FileDescriptor folder_fd(::open(folder.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
  if (!folder_fd.valid()) return {};
  if (method != BeneathMethod::component_walk) {
    FileDescriptor fd = open_by_openat2(folder_fd.get(), relative);
    if (fd.valid() || errno != ENOSYS || method == BeneathMethod::openat2) return fd;
  }
  return open_by_component_walk(folder_fd.get(), relative);
}

}  // namespace dprun
