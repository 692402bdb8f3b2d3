#pragma once
// Collective operations between devices (torch.nn.parallel.comm).
#include <vector>

#include "engine/tensor.h"

namespace dprun {

/// Sums `inputs` (one per device, same shape and floating dtype) onto `destination`, adding
/// them in list order so that the result does not depend on timing. Throws naming the input
/// that disagrees in shape or dtype.
Tensor reduce_add(const std::vector<Tensor>& inputs, Device destination);

/// reduce_add for several tensors at once: `inputs[d]` holds device d's tensors, all lists in
/// the same order, and result k is the sum of inputs[0][k], inputs[1][k], ... in that order.
/// The elements of all the sums are split over the worker threads of `workers` (CPU devices,
/// see run_in_parts); the results do not depend on the split.
std::vector<Tensor> reduce_add_coalesced(const std::vector<std::vector<Tensor>>& inputs,
                                         Device destination,
                                         const std::vector<Device>& workers = {});

}  // namespace dprun
