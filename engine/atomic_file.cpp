#include "engine/atomic_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <vector>

#include "engine/error.h"

namespace dprun {

namespace {

// Writes every byte, retrying short writes and interrupted calls. Returns 0 or an errno.
int write_all(int fd, std::string_view bytes) {
  while (!bytes.empty()) {
    const ssize_t n = ::write(fd, bytes.data(), bytes.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return errno;
    if (n == 0) return EIO;
    bytes.remove_prefix(static_cast<size_t>(n));
  }
  return 0;
}

// The process's umask, read without changing it (umask(2) would, for every thread at once).
mode_t current_umask() {
  std::ifstream status("/proc/self/status");
  std::string key;
  while (status >> key) {
    if (key == "Umask:") {
      unsigned mask = 022;
      status >> std::oct >> mask;
      return static_cast<mode_t>(mask);
    }
    status.ignore(1 << 16, '\n');
  }
  return 022;
}

void sync_folder(const std::filesystem::path& folder) {
  const int fd = ::open(folder.empty() ? "." : folder.c_str(), O_RDONLY | O_DIRECTORY);
  if (fd < 0) return;  // the rename is done; only its durability across a power cut is lost
  ::fsync(fd);
  ::close(fd);
}

}  // namespace

void write_file_atomically(const std::string& path, std::string_view contents) {
  const std::filesystem::path target(path);
  const std::filesystem::path folder = target.parent_path();
  // Built by appends: GCC 12 reports a false -Wrestrict for "." + name + "...".
  std::string hidden(1, '.');
  hidden.append(target.filename().string()).append(".XXXXXX");
  const std::string pattern = (folder / hidden).string();
  std::vector<char> tmp(pattern.begin(), pattern.end());
  tmp.push_back('\0');
  const int fd = ::mkstemp(tmp.data());
  if (fd < 0) fail(path, ": cannot be written (", std::strerror(errno), ")");
  // mkstemp makes the file 0600; a written model gets the mode a plain create would give it.
  int error = ::fchmod(fd, 0666 & ~current_umask()) == 0 ? 0 : errno;
  if (!error) error = write_all(fd, contents);
  if (!error && ::fsync(fd) != 0) error = errno;
  if (::close(fd) != 0 && !error) error = errno;
  if (!error && ::rename(tmp.data(), path.c_str()) != 0) error = errno;
  if (error) {
    ::unlink(tmp.data());
    fail(path, ": cannot be written (", std::strerror(error), ")");
  }
  sync_folder(folder);
}

}  // namespace dprun
