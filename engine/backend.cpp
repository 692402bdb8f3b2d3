#include "engine/backend.h"

#include <array>
#include <cctype>
#include <string>

#include "engine/error.h"
#include "engine/tensor.h"

namespace dprun {

namespace {
std::array<Backend*, 3>& backends() {  // by DeviceType
  static std::array<Backend*, 3> table{};
  return table;
}

std::string no_backend_message(DeviceType type) {
  std::string name(device_type_name(type));
  for (char& c : name) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return "this build of dprun has no " + name + " support";
}
}  // namespace

std::shared_ptr<const Graph> Backend::rewrite_for_kernels(std::shared_ptr<const Graph> graph,
                                                          const GraphRewriteOptions&) const {
  return graph;
}

void Backend::broadcast_coalesced(const std::vector<Tensor>&,
                                  const std::vector<std::vector<Tensor>>&) {
  fail("broadcast between ", device_type_name(type()), " devices: this backend has no device ",
       "collectives");
}

void Backend::reduce_add_coalesced(const std::vector<std::vector<Tensor>>&,
                                   const std::vector<Tensor>&) {
  fail("reduce_add between ", device_type_name(type()), " devices: this backend has no device ",
       "collectives");
}

void register_backend(DeviceType type, Backend* backend) {
  backends()[static_cast<size_t>(type)] = backend;
}

Backend& backend_for(DeviceType type) {
  Backend* b = backends()[static_cast<size_t>(type)];
  if (b == nullptr) fail(no_backend_message(type));
  return *b;
}

Backend& backend_for(Device device) {
  Backend* b = backends()[static_cast<size_t>(device.type)];
  if (b == nullptr) fail("device ", device.to_string(), ": ", no_backend_message(device.type));
  return *b;
}

bool backend_available(DeviceType type) {
  Backend* b = backends()[static_cast<size_t>(type)];
  return b != nullptr && b->device_count() > 0;
}

void copy_bytes(void* dst, Device dst_device, const void* src, Device src_device, size_t bytes) {
  if (bytes == 0) return;
  // A non-CPU side owns the transfer; CPU to CPU is a plain copy.
  Device owner = dst_device.type != DeviceType::CPU ? dst_device : src_device;
  backend_for(owner).copy(dst, dst_device, src, src_device, bytes);
}

}  // namespace dprun
