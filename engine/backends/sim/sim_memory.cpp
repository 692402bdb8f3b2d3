#include "engine/backends/sim/sim_memory.h"

#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstring>

#include "engine/backend.h"
#include "engine/error.h"

namespace dprun {

namespace {

// The span of addresses simulated devices have mapped, for the fault handler (which may read
// only lock-free state).
std::atomic<uintptr_t> lowest_mapping{UINTPTR_MAX};
std::atomic<uintptr_t> highest_mapping_end{0};
struct sigaction previous_segv_action;

void note_mapping(uintptr_t start, size_t bytes) {
  uintptr_t low = lowest_mapping.load();
  while (start < low && !lowest_mapping.compare_exchange_weak(low, start)) {
  }
  uintptr_t high = highest_mapping_end.load();
  while (start + bytes > high && !highest_mapping_end.compare_exchange_weak(high, start + bytes)) {
  }
}

// Names the cause when the faulting address lies among simulated device memory, then lets the
// fault take its previous course (the default: the process dies of SIGSEGV).
void on_segv(int signal, siginfo_t* info, void*) {
  const auto address = reinterpret_cast<uintptr_t>(info->si_addr);
  if (address >= lowest_mapping.load() && address < highest_mapping_end.load()) {
    static const char message[] =
        "dprun: host code touched simulated device memory outside the device's kernels and "
        "copies\n";
    [[maybe_unused]] ssize_t written = write(STDERR_FILENO, message, sizeof message - 1);
  }
  sigaction(signal, &previous_segv_action, nullptr);  // the faulting access repeats on return
}

void install_fault_message() {
  static const bool installed = [] {
    struct sigaction action {};
    action.sa_sigaction = on_segv;
    action.sa_flags = SA_SIGINFO;
    sigemptyset(&action.sa_mask);
    sigaction(SIGSEGV, &action, &previous_segv_action);
    return true;
  }();
  (void)installed;
}

size_t page_size() {
  static const size_t size = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  return size;
}

size_t mapped_size(size_t bytes) {
  const size_t page = page_size();
  return std::max<size_t>(1, (bytes + page - 1) / page) * page;
}

}  // namespace

SimMemory::~SimMemory() {
  for (const auto& [start, bytes] : mappings_) munmap(start, bytes);
}

void* SimMemory::allocate(size_t bytes) {
  install_fault_message();
  const size_t size = mapped_size(bytes);
  std::lock_guard lock(mutex_);
  const int protection = open_scopes_ > 0 ? PROT_READ | PROT_WRITE : PROT_NONE;
  void* start = mmap(nullptr, size, protection, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (start == MAP_FAILED)
    fail(device_.to_string(), ": cannot map ", bytes, " bytes: ", std::strerror(errno));
  note_mapping(reinterpret_cast<uintptr_t>(start), size);
  mappings_.emplace(start, size);
  stats_.in_use += bytes;
  stats_.peak_in_use = std::max(stats_.peak_in_use, stats_.in_use);
  return start;
}

void SimMemory::deallocate(void* ptr, size_t bytes) {
  std::lock_guard lock(mutex_);
  auto it = mappings_.find(ptr);
  if (it == mappings_.end()) return;
  munmap(it->first, it->second);
  mappings_.erase(it);
  stats_.in_use -= bytes;
}

AllocatorStats SimMemory::stats() const {
  std::lock_guard lock(mutex_);
  return stats_;
}

void SimMemory::open() {
  std::lock_guard lock(mutex_);
  if (open_scopes_ > 0) {
    ++open_scopes_;
    return;
  }
  for (const auto& [start, bytes] : mappings_)
    if (mprotect(start, bytes, PROT_READ | PROT_WRITE) != 0)
      fail(device_.to_string(), ": cannot open device memory to the host: ", std::strerror(errno));
  open_scopes_ = 1;
}

void SimMemory::close() {
  std::lock_guard lock(mutex_);
  if (--open_scopes_ > 0) return;
  // A mapping left open only weakens the check; closing must not throw (SimAccess's destructor).
  for (const auto& [start, bytes] : mappings_) mprotect(start, bytes, PROT_NONE);
}

SimAccess::SimAccess(Device device) {
  if (device.type != DeviceType::Sim) return;
  memory_ = std::static_pointer_cast<SimMemory>(backend_for(device).allocator(device));
  memory_->open();
}

SimAccess::~SimAccess() {
  if (memory_) memory_->close();
}

}  // namespace dprun
