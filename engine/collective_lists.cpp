#include "engine/collective_lists.h"

#include <set>
#include <string>

#include "engine/error.h"

namespace dprun {

namespace {

// The device of `type` that holds all of `tensors` (not empty); fails naming `what` otherwise.
Device list_device(const std::vector<Tensor>& tensors, DeviceType type, const std::string& what) {
  const Device device = tensors[0].device();
  DPRUN_CHECK(device.type == type, what, ": tensor 0 is on ", device.to_string(), ", not on a ",
              device_type_name(type), " device");
  for (size_t k = 1; k < tensors.size(); ++k)
    DPRUN_CHECK(tensors[k].device() == device, what, ": tensor ", k, " is on ",
                tensors[k].device().to_string(), " but tensor 0 on ", device.to_string());
  return device;
}

void check_distinct(const std::vector<Device>& devices, const char* op) {
  std::set<Device> seen;
  for (const Device& d : devices)
    DPRUN_CHECK(seen.insert(d).second, op, ": ", d.to_string(),
                " is listed twice; each list needs a device of its own");
}

// Checks that `list` has one tensor like each of `reference`, naming the list `what`.
void check_like(const std::vector<Tensor>& list, const std::vector<Tensor>& reference,
                const std::string& what, const char* reference_name) {
  DPRUN_CHECK(list.size() == reference.size(), what, " has ", list.size(), " tensors for ",
              reference.size(), " ", reference_name);
  for (size_t k = 0; k < list.size(); ++k)
    DPRUN_CHECK(list[k].shape() == reference[k].shape() && list[k].dtype() == reference[k].dtype(),
                what, ", tensor ", k, ", is ", list[k].describe(), " but should be like ",
                reference[k].describe());
}

}  // namespace

std::vector<Device> broadcast_devices(const std::vector<Tensor>& sources,
                                      const std::vector<std::vector<Tensor>>& destinations,
                                      DeviceType type) {
  if (sources.empty() || destinations.empty()) return {};
  std::vector<Device> devices = {list_device(sources, type, "broadcast_coalesced: the sources")};
  for (size_t d = 0; d < destinations.size(); ++d) {
    const std::string list = "broadcast_coalesced: destination list " + std::to_string(d);
    check_like(destinations[d], sources, list, "sources");
    devices.push_back(list_device(destinations[d], type, list));
  }
  check_distinct(devices, "broadcast_coalesced");
  return devices;
}

ReduceDevices reduce_add_devices(const std::vector<std::vector<Tensor>>& inputs,
                                 const std::vector<Tensor>& outputs, DeviceType type) {
  DPRUN_CHECK(!inputs.empty(), "reduce_add_coalesced: no input lists");
  const Device out = list_device(outputs, type, "reduce_add_coalesced: the outputs");
  ReduceDevices result;
  bool found = false;
  for (size_t d = 0; d < inputs.size(); ++d) {
    const std::string list = "reduce_add_coalesced: input list " + std::to_string(d);
    check_like(inputs[d], outputs, list, "outputs");
    result.inputs.push_back(list_device(inputs[d], type, list));
    if (result.inputs.back() == out) {
      result.root = d;
      found = true;
    }
  }
  check_distinct(result.inputs, "reduce_add_coalesced");
  DPRUN_CHECK(found, "reduce_add_coalesced: the outputs are on ", out.to_string(),
              ", which holds none of the input lists");
  return result;
}

}  // namespace dprun
