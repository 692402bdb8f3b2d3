#pragma once
// CPU backend: any number of virtual devices cpu:0..cpu:N-1 over the host's cores. Each
// virtual device has its own caching allocator; its core share is given by cpu_core_share
// (engine/backends/cpu/cpu_cores.h), and its runs execute on a CpuExecutionContext.
#include <map>
#include <memory>
#include <mutex>

#include "engine/backend.h"

namespace dprun {

class CpuBackend : public Backend {
 public:
  DeviceType type() const override { return DeviceType::CPU; }
  /// The cores this process may run on.
  int device_count() const override;
  void check_device(Device device) const override;
  std::shared_ptr<Allocator> allocator(Device device) override;
  void copy(void* dst, Device dst_device, const void* src, Device src_device,
            size_t bytes) override;
  void synchronize(Device) override {}
  /// compute_units: the size of the device's core share among `device_count` devices.
  DeviceProperties properties(Device device, int device_count) const override;
  std::unique_ptr<ExecutionContext> create_execution_context(
      Device device, const ExecutionConfig& config) override;

  static CpuBackend& instance();

 protected:
  /// With options.fusion, op fusion (fuse_ops), then with options.layout the channels-last
  /// rewrite (rewrite_channels_last), each where any node qualifies; `graph` when neither does.
  std::shared_ptr<const Graph> rewrite_for_kernels(
      std::shared_ptr<const Graph> graph, const GraphRewriteOptions& options) const override;

 private:
  std::mutex mutex_;
  std::map<int, std::shared_ptr<Allocator>> allocators_;
};

}  // namespace dprun
