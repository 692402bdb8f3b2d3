#pragma once
// gather(): collect per-replica outputs on one device (torch.nn.parallel.gather).
#include <vector>

#include "engine/tensor.h"

namespace dprun {

/// `outputs[r][o]` is output o of replica r. For each o: when every replica's tensor is 0-d,
/// the result is a 1-d tensor of len(replicas) values (with a one-time warning, as PyTorch
/// gives); otherwise the tensors are concatenated along `dim` (negative counts from the end)
/// on `output_device`. Sizes outside `dim` must agree; a mismatch is an error naming the
/// output and the replicas.
std::vector<Tensor> gather(const std::vector<std::vector<Tensor>>& outputs, Device output_device,
                           int64_t dim);

}  // namespace dprun
