#pragma once
// CPU backend: any number of virtual devices cpu:0..cpu:N-1 over the host's cores. Each
// virtual device has its own caching allocator; its core share is given by cpu_core_share.
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "engine/backend.h"

namespace dprun {

class CpuBackend : public Backend {
 public:
  DeviceType type() const override { return DeviceType::CPU; }
  int device_count() const override;
  void check_device(Device device) const override;
  std::shared_ptr<Allocator> allocator(Device device) override;
  void copy(void* dst, Device dst_device, const void* src, Device src_device,
            size_t bytes) override;
  void synchronize(Device) override {}
  DeviceProperties properties(Device device) const override;
  int prepare_worker_thread(Device device, int device_count, int threads) override;

  static CpuBackend& instance();

 private:
  std::mutex mutex_;
  std::map<int, std::shared_ptr<Allocator>> allocators_;
};

/// Number of cores this process may run on (its affinity mask), at least 1.
int available_cores();
/// The cores of virtual device `index` when `count` CPU devices share the machine: a disjoint
/// contiguous block when count <= cores, otherwise core (index mod cores).
std::vector<int> cpu_core_share(int index, int count);
/// Pins the calling thread to `cores` where the OS allows; returns false when it could not.
bool pin_current_thread(const std::vector<int>& cores);

}  // namespace dprun
