#pragma once
// Synchronized BatchNormalization (PyTorch's SyncBatchNorm) for the replicas of one
// DataParallel step: each training-mode BatchNormalization normalizes with the statistics of
// the whole batch, summed over the replicas, instead of its own chunk's. A step over several
// devices then trains as a one-device step on the whole batch, the running statistics
// included.
//
// Each such node becomes ONNX nodes plus AllReduceSum (rewrite domain: the elementwise sum of
// a value over the replicas of the run, added in replica order; the value itself in a run on
// its own), whose gradient is AllReduceSum of the output's gradient, so the gradient builder
// derives the synchronized backward pass with no rule of its own:
//
//   n     = AllReduceSum(elements per channel of this chunk)
//   mean  = AllReduceSum(ReduceSum(X)) / n
//   var   = AllReduceSum(ReduceSum((X - mean)^2)) / n          (two passes, as the kernel)
//   Y     = (X - mean) / sqrt(var + epsilon) * scale + B
//   running_mean = momentum * running_mean + (1 - momentum) * mean
//   running_var  = momentum * running_var + (1 - momentum) * var * n / max(n - 1, 1)
//
// (the running variance unbiased, as PyTorch's; the running outputs keep the node's output
// names, so the graph's state updates still write them back).
#include "engine/graph.h"

namespace dprun {

/// Rewrites every training-mode BatchNormalization of `graph` (the ai.onnx op, opset 9 on;
/// training_mode=1 from opset 14, more than one named output before) as above and imports
/// the rewrite domain. Throws Error naming a node it cannot rewrite: an opset before 9, or X
/// and scale of different types.
void synchronize_batch_norms(Graph& graph);

}  // namespace dprun
