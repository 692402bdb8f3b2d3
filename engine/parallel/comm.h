#pragma once
// Collective operations between devices (torch.nn.parallel.comm).
#include <vector>

#include "engine/tensor.h"

namespace dprun {

/// Sums `inputs` (one per device, same shape and floating dtype) onto `destination`, adding
/// them in list order so that the result does not depend on timing. Throws naming the input
/// that disagrees in shape or dtype.
Tensor reduce_add(const std::vector<Tensor>& inputs, Device destination);

}  // namespace dprun
