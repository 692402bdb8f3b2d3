#include "engine/backends/cpu/cpu_backend.h"

#include <algorithm>
#include <cstring>

#include "engine/backends/cpu/channels_last_fusion.h"
#include "engine/backends/cpu/cpu_cores.h"
#include "engine/backends/cpu/cpu_execution_context.h"
#include "engine/backends/cpu/layout_rewrite.h"
#include "engine/error.h"
#include "engine/rewrites/op_fusion.h"

namespace dprun {

namespace {
struct CpuBackendRegistrar {
  CpuBackendRegistrar() { register_backend(DeviceType::CPU, &CpuBackend::instance()); }
} registrar;
}  // namespace

CpuBackend& CpuBackend::instance() {
  static CpuBackend backend;
  return backend;
}

int CpuBackend::device_count() const {
  return available_cores();
}

void CpuBackend::check_device(Device device) const {
  DPRUN_CHECK(device.type == DeviceType::CPU && device.index >= 0,
              "not a CPU device: ", device.to_string());
}

std::shared_ptr<Allocator> CpuBackend::allocator(Device device) {
  check_device(device);
  std::lock_guard lock(mutex_);
  auto& slot = allocators_[device.index];
  if (!slot) slot = std::make_shared<CachingHostAllocator>(device);
  return slot;
}

void CpuBackend::copy(void* dst, Device, const void* src, Device, size_t bytes) {
  if (bytes) std::memcpy(dst, src, bytes);
}

DeviceProperties CpuBackend::properties(Device device, int device_count) const {
  check_device(device);
  DeviceProperties p;
  p.name = device.to_string();
  p.compute_units =
      static_cast<int>(cpu_core_share(device.index, std::max(device_count, 1)).size());
  return p;
}

std::unique_ptr<ExecutionContext> CpuBackend::create_execution_context(
    Device device, const ExecutionConfig& config) {
  check_device(device);
  return std::make_unique<CpuExecutionContext>(device, config);
}

std::shared_ptr<const Graph> CpuBackend::rewrite_for_kernels(
    std::shared_ptr<const Graph> graph, const GraphRewriteOptions& options) const {
  if (options.fusion)
    if (std::shared_ptr<const Graph> fused = fuse_ops(*graph, DeviceType::CPU)) graph = fused;
  if (options.layout)
    if (std::shared_ptr<const Graph> nhwc = rewrite_channels_last(*graph)) {
      graph = nhwc;
      if (options.fusion)
        if (std::shared_ptr<const Graph> fused = fuse_channels_last_ops(*graph)) graph = fused;
    }
  return graph;
}

}  // namespace dprun
