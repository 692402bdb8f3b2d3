#pragma once
// Memory of the simulated devices (engine/backends/sim): host memory that the host can touch
// only through the device. Each allocation is its own page-aligned mapping, readable and
// writable only while an access scope of its device is open (SimAccess: a sim kernel running,
// a copy or collective through the sim backend); at any other time it is mapped PROT_NONE, so
// host code that reads device memory directly, which on a GPU would read garbage or crash,
// stops the process with a message naming the simulated device memory it touched.
#include <cstddef>
#include <map>
#include <memory>
#include <mutex>

#include "engine/allocator.h"

namespace dprun {

/// The memory of one simulated device. Thread-safe.
class SimMemory : public Allocator {
 public:
  explicit SimMemory(Device device) : device_(device) {}
  ~SimMemory() override;
  /// A new mapping of `bytes` rounded up to whole pages, accessible while a scope is open.
  void* allocate(size_t bytes) override;
  void deallocate(void* ptr, size_t bytes) override;
  Device device() const override { return device_; }
  AllocatorStats stats() const override;

  /// Makes every mapping accessible until the matching close(); scopes nest and may be open
  /// on several threads at once (the memory is protected again when the last one closes).
  void open();
  void close();

 private:
  Device device_;
  mutable std::mutex mutex_;
  std::map<void*, size_t> mappings_;  // start -> mapped bytes
  int open_scopes_ = 0;
  AllocatorStats stats_;
};

/// Opens access to the memory of a simulated device for the lifetime of the object; does
/// nothing for a device of another type.
class SimAccess {
 public:
  explicit SimAccess(Device device);
  ~SimAccess();
  SimAccess(const SimAccess&) = delete;
  SimAccess& operator=(const SimAccess&) = delete;

 private:
  std::shared_ptr<SimMemory> memory_;
};

}  // namespace dprun
