#pragma once
// Memory of the simulated devices (engine/backends/sim): host memory that the host can touch
// only through the device. Each allocation is its own page-aligned mapping, mapped PROT_NONE
// except while a scope (SimAccess) names it: a sim kernel opens its operands, a copy its source
// and destination. Host code that reads device memory directly, which on a GPU would read
// garbage or crash, stops the process with a message saying it touched simulated device
// memory; so does a kernel that reads device memory it was not given.
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "engine/allocator.h"

namespace dprun {

class Tensor;

/// The memory of one simulated device. Thread-safe.
class SimMemory : public Allocator {
 public:
  explicit SimMemory(Device device) : device_(device) {}
  ~SimMemory() override;
  /// A new mapping of `bytes` rounded up to whole pages; open while any scope of the device is
  /// (a kernel's outputs are allocated inside its scope), closed from the last one's end.
  void* allocate(size_t bytes) override;
  void deallocate(void* ptr, size_t bytes) override;
  Device device() const override { return device_; }
  AllocatorStats stats() const override;

  /// Opens the mappings that hold `pointers` (addresses in this device's memory; others are
  /// ignored) until the matching close(pointers). Scopes nest, per mapping, on any thread.
  void open(const std::vector<const void*>& pointers);
  void close(const std::vector<const void*>& pointers);

 private:
  struct Mapping {
    size_t bytes = 0;
    int opened = 0;      // scopes naming it
    bool fresh = false;  // made while a scope was open: open until none is
  };
  // The mapping that holds `pointer`; mappings_.end() when none does.
  std::map<uintptr_t, Mapping>::iterator holding(const void* pointer);

  Device device_;
  mutable std::mutex mutex_;
  std::map<uintptr_t, Mapping> mappings_;  // by start address
  int scopes_ = 0;                         // scopes open on the device
  std::vector<uintptr_t> made_in_scope_;   // the fresh mappings
  AllocatorStats stats_;
};

/// Opens the memory of a simulated device behind `pointers` for the lifetime of the object;
/// does nothing for a device of another type.
class SimAccess {
 public:
  SimAccess(Device device, std::vector<const void*> pointers);
  ~SimAccess();
  SimAccess(const SimAccess&) = delete;
  SimAccess& operator=(const SimAccess&) = delete;

 private:
  std::shared_ptr<SimMemory> memory_;
  std::vector<const void*> pointers_;
};

/// The data of those `tensors` that are defined and on `device`, for a SimAccess.
std::vector<const void*> data_on(Device device, const std::vector<const Tensor*>& tensors);

}  // namespace dprun
