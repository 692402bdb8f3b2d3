#pragma once
// What a run of a plan off the CPU copies back from its device to the host: each such copy
// makes the host wait for the device (on a GPU, for every kernel queued before it), so a plan
// that reads nothing back keeps the GPU busy from its inputs to its outputs. Found from the
// plan alone, the way the executor stages values (engine/executor.cpp), so it needs no device:
// `dprun inspect MODEL --devices cuda:0` lists them on any machine.
#include <string>
#include <vector>

#include "engine/plan.h"

namespace dprun {

/// A value read back from the device in every run, and the node that reads it.
struct DeviceRead {
  std::string value;
  const Node* reader = nullptr;
  size_t slot = 0;  // the reader's input slot
  /// True when the reader's kernel runs on the device and reads the value on the host (a
  /// Reshape's shape, KernelDef::host_inputs); false when the reader runs on the host.
  bool by_device_kernel = false;
};

/// The values a run of `plan` copies from its device to the host, in step order: inputs of a
/// host step (a fallback or shape arithmetic) that live on the device, other than those whose
/// dims only it reads and constants it has a host copy of; and inputs that a device kernel reads
/// on the host that live on the device. Values on the device: the run's inputs and parameters,
/// device kernels' outputs and host fallbacks' outputs (copied over); on the host: shape
/// arithmetic's results and string tensors. Empty for a CPU plan. Not counted: what a run
/// decides from its inputs' dtypes (PlanStep::host_kernel), subgraphs' own plans, and reading
/// the outputs.
std::vector<DeviceRead> device_reads_per_run(const Plan& plan);

}  // namespace dprun
