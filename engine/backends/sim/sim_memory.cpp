#include "engine/backends/sim/sim_memory.h"

#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>

#include "engine/backend.h"
#include "engine/backends/sim/sim_capture.h"
#include "engine/backends/sim/sim_drop_wait.h"
#include "engine/error.h"
#include "engine/tensor.h"

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
  for (const auto& [start, mapping] : mappings_)
    munmap(reinterpret_cast<void*>(start), mapping.bytes);
}

void* SimMemory::allocate(size_t bytes) {
  install_fault_message();
  // A capturing or replaying stream's allocations come from its graph's pool (sim_capture.h).
  std::shared_ptr<SimGraphPool> pool = sim_allocation_pool(device_, sim_current_stream(device_));
  std::lock_guard lock(mutex_);
  if (pool) return allocate_from_pool_locked(pool, bytes);
  const uintptr_t address = map_locked(mapped_size(bytes), nullptr);
  stats_.in_use += bytes;
  stats_.peak_in_use = std::max(stats_.peak_in_use, stats_.in_use);
  return reinterpret_cast<void*>(address);
}

uintptr_t SimMemory::map_locked(size_t size, std::shared_ptr<SimGraphPool> pool) {
  const int protection = scopes_ > 0 ? PROT_READ | PROT_WRITE : PROT_NONE;
  void* start = mmap(nullptr, size, protection, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (start == MAP_FAILED)
    fail(device_.to_string(), ": cannot map ", size, " bytes: ", std::strerror(errno));
  const auto address = reinterpret_cast<uintptr_t>(start);
  note_mapping(address, size);
  mappings_[address] = {.bytes = size,
                        .fresh = scopes_ > 0,
                        .owner = sim_current_stream(device_),
                        .pool = std::move(pool)};
  if (scopes_ > 0) made_in_scope_.push_back(address);
  return address;
}

void SimMemory::reopen_locked(uintptr_t address, Mapping& m) {
  // Its history of accesses stays: replays on other streams must be ordered after earlier ones.
  if (scopes_ == 0 || m.fresh) return;
  m.fresh = true;
  made_in_scope_.push_back(address);
  if (m.opened == 0) mprotect(reinterpret_cast<void*>(address), m.bytes, PROT_READ | PROT_WRITE);
}

void* SimMemory::allocate_from_pool_locked(const std::shared_ptr<SimGraphPool>& pool,
                                           size_t bytes) {
  const size_t size = mapped_size(bytes);
  uintptr_t address = 0;
  if (pool->replaying) {
    // A replay writes where the capture did: the n-th allocation gets the n-th address.
    const size_t n = pool->next;
    DPRUN_CHECK(n < pool->sequence.size(), device_.to_string(), ": a graph's replay makes more ",
                "allocations than its capture (", pool->sequence.size(),
                "): the replay does not repeat the capture");
    DPRUN_CHECK(pool->sequence[n].first == bytes, device_.to_string(), ": allocation ", n + 1,
                " of a graph's replay asks for ", bytes, " bytes where its capture asked for ",
                pool->sequence[n].first, ": the replay does not repeat the capture");
    ++pool->next;
    address = pool->sequence[n].second;
    if (sim_wait_dropped("graph_pool")) {  // the debug switch: fresh memory, not the capture's
      address = map_locked(size, pool);
      stats_.in_use += size;
    }
    std::erase(pool->free[size], address);
  } else if (auto bin = pool->free.find(size); bin != pool->free.end() && !bin->second.empty()) {
    address = bin->second.back();  // freed earlier in the capture: the graph's own order
    bin->second.pop_back();
  } else {
    address = map_locked(size, pool);
    stats_.in_use += size;
    stats_.peak_in_use = std::max(stats_.peak_in_use, stats_.in_use);
  }
  if (!pool->replaying) pool->sequence.emplace_back(bytes, address);
  ++pool->users[address];
  reopen_locked(address, mappings_.at(address));
  return reinterpret_cast<void*>(address);
}

void SimMemory::free_to_pool_locked(std::map<uintptr_t, Mapping>::iterator it) {
  SimGraphPool& pool = *it->second.pool;
  if (--pool.users[it->first] > 0) return;  // a replay's allocation and the capture's share it
  pool.users.erase(it->first);
  if (!pool.released) {
    pool.free[it->second.bytes].push_back(it->first);
    return;
  }
  munmap(reinterpret_cast<void*>(it->first), it->second.bytes);
  stats_.in_use -= it->second.bytes;
  mappings_.erase(it);
}

void SimMemory::deallocate(void* ptr, size_t bytes) {
  std::lock_guard lock(mutex_);
  auto it = mappings_.find(reinterpret_cast<uintptr_t>(ptr));
  if (it == mappings_.end()) return;
  if (it->second.pool) return free_to_pool_locked(it);
  check_release(it->second);
  munmap(ptr, it->second.bytes);
  mappings_.erase(it);
  stats_.in_use -= bytes;
}

void SimMemory::begin_replay(SimGraphPool& pool) {
  std::lock_guard lock(mutex_);
  pool.replaying = true;
  pool.next = 0;
}

void SimMemory::end_replay(SimGraphPool& pool) {
  std::lock_guard lock(mutex_);
  pool.replaying = false;
  DPRUN_CHECK(pool.next == pool.sequence.size(), device_.to_string(), ": a graph's replay made ",
              pool.next, " allocations where its capture made ", pool.sequence.size(),
              ": the replay does not repeat the capture");
}

void SimMemory::release_pool(SimGraphPool& pool) noexcept {
  std::lock_guard lock(mutex_);
  pool.released = true;
  pool.replaying = false;
  for (auto& [size, addresses] : pool.free)
    for (uintptr_t address : addresses)
      if (auto it = mappings_.find(address); it != mappings_.end()) {
        munmap(reinterpret_cast<void*>(address), it->second.bytes);
        stats_.in_use -= it->second.bytes;
        mappings_.erase(it);
      }
  pool.free.clear();
}

namespace {

// The message of a race between `later` and `earlier` work on one mapping.
std::string race_message(Device device, const std::string& later, SimStreamId later_stream,
                         const char* verb, const std::string& earlier, SimStreamId earlier_stream,
                         const char* earlier_verb) {
  return device.to_string() + ": " + later + " on " + sim_stream_name(later_stream) + " " + verb +
         " memory that " + earlier + " " + earlier_verb + " on " + sim_stream_name(earlier_stream) +
         ", and the host has not waited for that stream since: the two race on a GPU";
}

}  // namespace

void SimMemory::order(const SimStreamPoint& at, const std::shared_ptr<const std::string>& what,
                      const void* pointer, bool write) {
  std::lock_guard lock(mutex_);
  auto it = holding(pointer);
  if (it == mappings_.end()) return;
  Mapping& m = it->second;
  const char* verb = write ? "writes" : "reads";
  const Access& w = m.last_write;
  if (w.at.stream != 0 && !sim_ordered(w.at, at.stream))
    fail(race_message(device_, *what, at.stream, verb, *w.what, w.at.stream, "wrote"));
  if (write) {
    for (const Access& r : m.reads)
      if (!sim_ordered(r.at, at.stream))
        fail(race_message(device_, *what, at.stream, verb, *r.what, r.at.stream, "read"));
    m.last_write = {at, what};
    m.reads.clear();
    return;
  }
  // Reads the host has waited for order nothing: forget them (training makes many streams).
  std::erase_if(m.reads,
                [&](const Access& r) { return r.at.stream != at.stream && sim_done(r.at); });
  auto same_stream = std::find_if(m.reads.begin(), m.reads.end(),
                                  [&](const Access& r) { return r.at.stream == at.stream; });
  if (same_stream == m.reads.end())
    m.reads.push_back({at, what});
  else
    *same_stream = {at, what};
}

uintptr_t SimMemory::mapping_of(const void* pointer) {
  std::lock_guard lock(mutex_);
  auto it = holding(pointer);
  return it == mappings_.end() ? 0 : it->first;
}

void SimMemory::check_release(const Mapping& m) const {
  // The CUDA allocator reuses a block in its own stream's order, after the freeing stream's work
  // when that is another execution context's stream, and at once when no context is current.
  const SimStreamId freeing = sim_current_stream(device_);
  const bool ordered_after_freeing = !sim_is_default_stream(freeing);
  // Reuse is ordered after the owner's stream (and what it waited for), the freeing stream when
  // that is a context's, and the streams record_stream named.
  auto unordered = [&](const Access& a) {
    if (a.at.stream == 0 || sim_ordered(a.at, m.owner)) return false;
    if (ordered_after_freeing && sim_ordered(a.at, freeing)) return false;
    return std::find(m.recorded.begin(), m.recorded.end(), a.at.stream) == m.recorded.end();
  };
  const Access* pending = unordered(m.last_write) ? &m.last_write : nullptr;
  for (const Access& r : m.reads)
    if (pending == nullptr && unordered(r)) pending = &r;
  if (pending == nullptr) return;
  const std::string message = "dprun: " + device_.to_string() + ": memory freed on " +
                              sim_stream_name(freeing) + " while " + *pending->what + " on " +
                              sim_stream_name(pending->at.stream) +
                              " may still use it (the host has not waited for that stream): a "
                              "GPU's allocator could hand it to other work first\n";
  [[maybe_unused]] ssize_t written = write(STDERR_FILENO, message.data(), message.size());
  std::abort();  // a deallocation cannot throw
}

void SimMemory::record_stream(const void* pointer, SimStreamId stream) {
  std::lock_guard lock(mutex_);
  auto it = holding(pointer);
  if (it == mappings_.end() || stream == it->second.owner) return;
  std::vector<SimStreamId>& recorded = it->second.recorded;
  if (std::find(recorded.begin(), recorded.end(), stream) != recorded.end()) return;
  // A stream whose work is all done needs no event at release: keep the list short.
  std::erase_if(recorded, [](SimStreamId s) { return sim_idle(s); });
  recorded.push_back(stream);
}

AllocatorStats SimMemory::stats() const {
  std::lock_guard lock(mutex_);
  return stats_;
}

std::map<uintptr_t, SimMemory::Mapping>::iterator SimMemory::holding(const void* pointer) {
  const auto address = reinterpret_cast<uintptr_t>(pointer);
  auto it = mappings_.upper_bound(address);
  if (it == mappings_.begin()) return mappings_.end();
  --it;
  return address < it->first + it->second.bytes ? it : mappings_.end();
}

void SimMemory::open(const std::vector<const void*>& pointers) {
  std::lock_guard lock(mutex_);
  ++scopes_;
  for (const void* pointer : pointers) {
    auto it = holding(pointer);
    if (it == mappings_.end() || it->second.opened++ > 0) continue;
    if (mprotect(reinterpret_cast<void*>(it->first), it->second.bytes, PROT_READ | PROT_WRITE))
      fail(device_.to_string(), ": cannot open device memory to the host: ", std::strerror(errno));
  }
}

void SimMemory::close(const std::vector<const void*>& pointers) {
  // A mapping left open only weakens the check; closing must not throw (SimAccess's destructor).
  std::lock_guard lock(mutex_);
  for (const void* pointer : pointers) {
    auto it = holding(pointer);
    if (it != mappings_.end() && --it->second.opened == 0 && !it->second.fresh)
      mprotect(reinterpret_cast<void*>(it->first), it->second.bytes, PROT_NONE);
  }
  if (--scopes_ > 0) return;
  for (uintptr_t address : made_in_scope_)
    if (auto it = mappings_.find(address); it != mappings_.end() && it->second.fresh) {
      it->second.fresh = false;
      mprotect(reinterpret_cast<void*>(address), it->second.bytes, PROT_NONE);
    }
  made_in_scope_.clear();
}

SimAccess::SimAccess(Device device, std::vector<const void*> pointers)
    : pointers_(std::move(pointers)) {
  if (device.type != DeviceType::Sim) return;
  memory_ = sim_memory(device);
  memory_->open(pointers_);
}

SimAccess::~SimAccess() {
  if (memory_) memory_->close(pointers_);
}

namespace {
// The calling thread's kernel: its device and the mappings of the operands it reads in place.
struct InPlaceReads {
  Device device;
  std::vector<uintptr_t> mappings;
  bool active = false;
};
thread_local InPlaceReads in_place_reads;
}  // namespace

SimInPlaceReads::SimInPlaceReads(Device device, const std::vector<const void*>& operands) {
  auto memory = sim_memory(device);
  in_place_reads.device = device;
  in_place_reads.mappings.clear();
  for (const void* p : operands) in_place_reads.mappings.push_back(memory->mapping_of(p));
  in_place_reads.active = true;
}

SimInPlaceReads::~SimInPlaceReads() {
  in_place_reads.active = false;
  in_place_reads.mappings.clear();
}

bool SimInPlaceReads::covers(Device device, const void* src) {
  if (!in_place_reads.active || device != in_place_reads.device) return false;
  const uintptr_t mapping = sim_memory(device)->mapping_of(src);
  return mapping != 0 &&
         std::count(in_place_reads.mappings.begin(), in_place_reads.mappings.end(), mapping) != 0;
}

std::shared_ptr<SimMemory> sim_memory(Device device) {
  return std::static_pointer_cast<SimMemory>(backend_for(device).allocator(device));
}

SimWork::SimWork(Device device, std::string what)
    : at_(sim_book(sim_current_stream(device))),
      what_(std::make_shared<const std::string>(std::move(what))) {}

void SimWork::reads(Device device, const void* data) {
  access(device, data, false);
}

void SimWork::writes(Device device, const void* data) {
  access(device, data, true);
}

void SimWork::access(Device device, const void* data, bool write) {
  if (device.type == DeviceType::Sim) sim_memory(device)->order(at_, what_, data, write);
}

void SimWork::wait() {
  sim_complete(at_.stream);
}

std::vector<const void*> data_on(Device device, const std::vector<const Tensor*>& tensors) {
  std::vector<const void*> out;
  for (const Tensor* t : tensors)
    if (t != nullptr && t->defined() && t->device() == device) out.push_back(t->raw_data());
  return out;
}

}  // namespace dprun
