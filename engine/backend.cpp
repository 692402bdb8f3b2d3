#include "engine/backend.h"

#include <array>

#include "engine/error.h"

namespace dprun {

namespace {
std::array<Backend*, 2>& backends() {
  static std::array<Backend*, 2> table{};
  return table;
}
}  // namespace

void register_backend(DeviceType type, Backend* backend) {
  backends()[static_cast<size_t>(type)] = backend;
}

Backend& backend_for(DeviceType type) {
  Backend* b = backends()[static_cast<size_t>(type)];
  if (b == nullptr) fail("no ", device_type_name(type), " backend in this build");
  return *b;
}

bool backend_available(DeviceType type) {
  Backend* b = backends()[static_cast<size_t>(type)];
  return b != nullptr && b->device_count() > 0;
}

void copy_bytes(void* dst, Device dst_device, const void* src, Device src_device, size_t bytes) {
  if (bytes == 0) return;
  // A non-CPU side owns the transfer; CPU to CPU is a plain copy.
  DeviceType owner = dst_device.type != DeviceType::CPU ? dst_device.type : src_device.type;
  backend_for(owner).copy(dst, dst_device, src, src_device, bytes);
}

}  // namespace dprun
