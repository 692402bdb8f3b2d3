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

AtomicFileWriter::AtomicFileWriter(std::string path) : path_(std::move(path)) {
  const std::filesystem::path target(path_);
  // Built by appends: GCC 12 reports a false -Wrestrict for "." + name + "...".
  std::string hidden(1, '.');
  hidden.append(target.filename().string()).append(".XXXXXX");
  const std::string pattern = (target.parent_path() / hidden).string();
  std::vector<char> name(pattern.begin(), pattern.end());
  name.push_back('\0');
  fd_ = ::mkstemp(name.data());
  if (fd_ < 0) fail(path_, ": cannot be written (", std::strerror(errno), ")");
  temporary_ = name.data();
  // mkstemp makes the file 0600; a written file gets the mode a plain create would give it.
  if (::fchmod(fd_, 0666 & ~current_umask()) != 0) fail_with(errno);
}

AtomicFileWriter::~AtomicFileWriter() {
  if (fd_ >= 0) ::close(fd_);
  if (!temporary_.empty()) ::unlink(temporary_.c_str());
}

void AtomicFileWriter::fail_with(int error) {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  ::unlink(temporary_.c_str());
  temporary_.clear();
  fail(path_, ": cannot be written (", std::strerror(error), ")");
}

void AtomicFileWriter::write(std::string_view bytes) {
  DPRUN_CHECK(fd_ >= 0, path_, ": written after it was committed or failed");
  if (const int error = write_all(fd_, bytes)) fail_with(error);
  size_ += bytes.size();
}

void AtomicFileWriter::commit() {
  DPRUN_CHECK(fd_ >= 0, path_, ": committed twice or after it failed");
  if (::fsync(fd_) != 0) fail_with(errno);
  const int closed = ::close(fd_);
  fd_ = -1;
  if (closed != 0) fail_with(errno);
  if (::rename(temporary_.c_str(), path_.c_str()) != 0) fail_with(errno);
  temporary_.clear();
  sync_folder(std::filesystem::path(path_).parent_path());
}

void write_file_atomically(const std::string& path, std::string_view contents) {
  AtomicFileWriter file(path);
  file.write(contents);
  file.commit();
}

}  // namespace dprun
