#pragma once
// What BatchNormalization's kernels share to agree on a node: whether it is in training mode or
// per activation, and the checks of X and the parameter vectors (so a bad shape fails with the same
// message on the host, ops/normalization/batch_norm.cpp, and on CUDA,
// ops/normalization/batch_norm_training.cu).
#include <cstdint>

#include "engine/autograd/inference_graph.h"
#include "engine/kernel.h"
#include "ops/common/reduce_common.h"

namespace dprun {

/// Training mode (engine/autograd/inference_graph.h says when).
inline bool batch_norm_training(const KernelInfo& info) {
  return batch_norm_in_training_mode(info.node, info.opset);
}

/// Per-activation parameters ([C, D1, ...]): spatial=0, which exists before opset 9 only.
inline bool batch_norm_per_activation(const KernelInfo& info) {
  return info.opset < 9 && info.node.attr_int("spatial", 1) == 0;
}

/// Whether every parameter (inputs 1 to 4) whose type is known has X's dtype, if X's is known.
inline bool batch_norm_params_of_x_dtype(const KernelInfo& info) {
  const auto& types = info.input_types;
  for (size_t i = 1; i < types.size() && i < 5; ++i)
    if (types[0] && types[i] && types[i]->dtype != types[0]->dtype) return false;
  return true;
}

/// X [N, C, D1, ...] seen as [N, C, S], S = D1 * D2 * ...
struct BatchNormDims {
  int64_t n, c, s;
};

/// X's dims; fails unless X has rank >= 2.
inline BatchNormDims batch_norm_dims(const KernelContext& ctx, const Tensor& x) {
  if (x.rank() < 2)
    ctx.fail("X must have rank >= 2 ([N, C, ...]), got shape ", shape_to_string(x.shape()));
  return {x.shape()[0], x.shape()[1], dims_product(x.shape(), 2, x.rank())};
}

/// Fails unless scale, B, mean and var (inputs 1 to 4) have `count` elements each.
inline void check_batch_norm_params(const KernelContext& ctx, int64_t count, const Shape& x_shape) {
  const char* names[] = {"scale", "B", "mean", "var"};
  for (size_t i = 1; i <= 4; ++i) check_param_size(ctx, ctx.input(i), count, names[i - 1], x_shape);
}

}  // namespace dprun
