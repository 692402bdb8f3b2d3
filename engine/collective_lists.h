#pragma once
// The checks a backend's device collectives (Backend::broadcast_coalesced and
// reduce_add_coalesced) make of the lists they are given, shared by the backends that have
// collectives (CUDA over NCCL, the simulated devices) so that both refuse the same calls with
// the same messages.
#include <cstddef>
#include <vector>

#include "engine/device.h"
#include "engine/tensor.h"

namespace dprun {

/// The devices of a broadcast_coalesced call, the sources' first and then each destination
/// list's. Throws Error unless every list is on one device of `type`, the devices are
/// distinct, each destination list has as many tensors as the sources, and each destination
/// tensor has its source's shape and dtype. Empty sources or destinations: no devices.
std::vector<Device> broadcast_devices(const std::vector<Tensor>& sources,
                                      const std::vector<std::vector<Tensor>>& destinations,
                                      DeviceType type);

/// The devices of a reduce_add_coalesced call's input lists, and which list is on the outputs'
/// device.
struct ReduceDevices {
  std::vector<Device> inputs;
  size_t root = 0;
};

/// Checks a reduce_add_coalesced call as broadcast_devices does (the outputs one list on one
/// device, each input list like them and on a distinct device of `type`), and that the outputs'
/// device holds one of the input lists. `outputs` is not empty.
ReduceDevices reduce_add_devices(const std::vector<std::vector<Tensor>>& inputs,
                                 const std::vector<Tensor>& outputs, DeviceType type);

}  // namespace dprun
