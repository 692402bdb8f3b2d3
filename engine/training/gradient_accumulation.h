#pragma once
// Gradient accumulation: the gradients of several batches summed before one update, as
// PyTorch accumulates .grad over backward() calls between two zero_grad()s. Trainer::
// forward_backward(..., accumulate = true) adds into its gradients(); a loop holding its own
// sums (DistributedDataParallel's, whose gradients() the next step overwrites) calls this.
#include <vector>

#include "engine/tensor.h"

namespace dprun {

/// sums[i] += more[i] for every i, in place, on the device that holds sums[i] (more[i] is
/// copied there first when it lives elsewhere). Throws Error naming the index when the lists'
/// lengths, or a pair's shapes or dtypes (float32 or float64), differ.
void add_gradients(const std::vector<Tensor>& sums, const std::vector<Tensor>& more);

}  // namespace dprun
