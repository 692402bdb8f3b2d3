#include "engine/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>

namespace dprun {

namespace {

size_t page_size() {
  static const auto size = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  return size;
}

// A Storage over a mapping, which it unmaps.
class MappedStorage : public Storage {
 public:
  MappedStorage(void* base, size_t length, size_t offset, size_t bytes)
      : Storage(static_cast<char*>(base) + offset, bytes, Device::cpu()),
        base_(base),
        length_(length) {}
  ~MappedStorage() { munmap(base_, length_); }
  MappedStorage(const MappedStorage&) = delete;
  MappedStorage& operator=(const MappedStorage&) = delete;

 private:
  void* base_;
  size_t length_;
};

}  // namespace

std::shared_ptr<Storage> map_file(const std::string& path, size_t offset, size_t bytes) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) fail(path, ": cannot be opened");
  struct stat st {};
  if (fstat(fd, &st) != 0 || static_cast<uint64_t>(st.st_size) < offset + bytes) {
    close(fd);
    fail(path, ": holds ", st.st_size, " bytes, fewer than the ", offset + bytes, " needed");
  }
  const size_t length = std::max<size_t>(offset + bytes, 1);
  void* base = mmap(nullptr, length, PROT_READ, MAP_PRIVATE, fd, 0);
  const int error = errno;
  close(fd);  // the mapping keeps the file
  if (base == MAP_FAILED) fail(path, ": cannot be mapped: ", std::strerror(error));
  return std::make_shared<MappedStorage>(base, length, offset, bytes);
}

void release_mapped_pages(const void* data, size_t bytes) {
  if (bytes == 0) return;
  const auto start = reinterpret_cast<uintptr_t>(data);
  const uintptr_t first = start / page_size() * page_size();
  const uintptr_t end = (start + bytes + page_size() - 1) / page_size() * page_size();
  madvise(reinterpret_cast<void*>(first), end - first, MADV_DONTNEED);
}

}  // namespace dprun
