#pragma once
// What a CUDA kernel's definition reads of a node to take or decline it (its `accepts`), from
// the node's attributes and known input types alone: plain C++, without the CUDA headers, so
// that every build plans for GPUs alike (ops/cuda/defs/cuda_compute.h).
#include <algorithm>
#include <cstddef>
#include <vector>

#include "engine/kernel.h"

namespace dprun::cudnn {

/// True when the node's input `i` is known (from its type) to be of a dtype not in `dtypes`.
inline bool known_not_of(const KernelInfo& info, size_t i, const std::vector<DType>& dtypes) {
  return i < info.input_types.size() && info.input_types[i] &&
         std::find(dtypes.begin(), dtypes.end(), info.input_types[i]->dtype) == dtypes.end();
}

/// True when the node's input `i` is known (from its type) not to be float32.
inline bool known_not_float32(const KernelInfo& info, size_t i) {
  return known_not_of(info, i, {DType::Float32});
}

/// The rank of the node's input `i` when its type says, else 0.
inline size_t known_rank(const KernelInfo& info, size_t i) {
  if (i >= info.input_types.size() || !info.input_types[i] || !info.input_types[i]->shape) return 0;
  return info.input_types[i]->shape->size();
}

/// True when a Conv or ConvTranspose node can run on cuDNN as far as planning can tell: the
/// rank of X or W (or kernel_shape) shows 1 to 3 spatial dims, and X, W and B are not known
/// to be of a dtype other than `dtypes`.
inline bool conv_node_fits(const KernelInfo& info,
                           const std::vector<DType>& dtypes = {DType::Float32}) {
  for (size_t i = 0; i < 3; ++i)
    if (known_not_of(info, i, dtypes)) return false;
  size_t rank = known_rank(info, 0);
  if (rank == 0) rank = known_rank(info, 1);
  if (rank == 0) {
    const auto kernel = info.node.attr_ints("kernel_shape", {});
    if (!kernel.empty()) rank = kernel.size() + 2;
  }
  return rank >= 3 && rank <= 5;
}

}  // namespace dprun::cudnn
