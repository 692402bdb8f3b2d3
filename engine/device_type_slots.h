#pragma once
// One object per accelerator device type, installed by the type's backend when it registers
// (its stream operations, its graph capture) and read on hot paths without a lock.
#include <array>
#include <atomic>
#include <cstddef>

#include "engine/device.h"

namespace dprun {

template <class T>
class DeviceTypeSlots {
 public:
  /// Installs `value` for `type`; nullptr removes it.
  void set(DeviceType type, T* value) {
    slots_[static_cast<size_t>(type)].store(value, std::memory_order_release);
  }
  /// What `type` installed; nullptr for the CPU and for types that installed nothing.
  T* get(DeviceType type) const {
    if (type == DeviceType::CPU) return nullptr;
    return slots_[static_cast<size_t>(type)].load(std::memory_order_acquire);
  }

 private:
  std::array<std::atomic<T*>, static_cast<size_t>(DeviceType::Sim) + 1> slots_{};
};

}  // namespace dprun
