#include "engine/backend.h"

#include <array>
#include <cctype>
#include <string>

#include "engine/cuda_plugin.h"
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

// The backend of `type`, opening the CUDA plugin the first time CUDA's is asked for; null when
// there is none, `why` then saying so.
Backend* backend_or_null(DeviceType type, std::string& why) {
  Backend* b = backends()[static_cast<size_t>(type)];
  if (b != nullptr) return b;
  if (type == DeviceType::CUDA && cuda_plugin_built()) {
    const CudaPluginLoad& plugin = load_cuda_plugin();
    b = backends()[static_cast<size_t>(type)];
    if (b == nullptr)
      why = plugin.loaded ? plugin.path + " registered no CUDA backend" : plugin.error;
    return b;
  }
  why = no_backend_message(type);
  return nullptr;
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
  std::string why;
  Backend* b = backend_or_null(type, why);
  if (b == nullptr) fail(why);
  return *b;
}

Backend& backend_for(Device device) {
  std::string why;
  Backend* b = backend_or_null(device.type, why);
  if (b == nullptr) fail("device ", device.to_string(), ": ", why);
  return *b;
}

bool backend_available(DeviceType type) {
  Backend* b = backends()[static_cast<size_t>(type)];
  // CUDA's backend is opened only where the driver reports a GPU: listing the devices of a
  // machine without one maps no CUDA library.
  if (b == nullptr && type == DeviceType::CUDA && cuda_plugin_built() && driver_gpu_count() > 0) {
    std::string why;
    b = backend_or_null(type, why);
  }
  return b != nullptr && b->device_count() > 0;
}

void copy_bytes(void* dst, Device dst_device, const void* src, Device src_device, size_t bytes) {
  if (bytes == 0) return;
  // A non-CPU side owns the transfer; CPU to CPU is a plain copy.
  Device owner = dst_device.type != DeviceType::CPU ? dst_device : src_device;
  backend_for(owner).copy(dst, dst_device, src, src_device, bytes);
}

}  // namespace dprun
