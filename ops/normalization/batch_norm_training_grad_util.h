#pragma once
// The inputs and outputs of a BatchNormTrainingGrad node (engine/rewrites/op_fusion.h), checked
// and allocated as every device's kernel does.
#include "engine/kernel.h"

namespace dprun {

/// X [N, C, S...] seen as [N, C, S], and the node's three outputs.
struct BatchNormGradTensors {
  int64_t n = 0, c = 0, s = 0;
  Tensor* dx = nullptr;          // like X
  Tensor* dscale_sum = nullptr;  // [1, C, 1, ...]
  Tensor* dbias_sum = nullptr;   // [1, C, 1, ...]
};

/// Checks float32 X, dY of X's shape and scale [C], and allocates the outputs; fails naming
/// what does not fit.
inline BatchNormGradTensors batch_norm_grad_tensors(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Tensor& dy = ctx.input(1);
  const Tensor& scale = ctx.input(2);
  if (x.dtype() != DType::Float32 || dy.dtype() != DType::Float32 ||
      scale.dtype() != DType::Float32)
    ctx.fail("X, dY and scale must be float32, got ", dtype_name(x.dtype()), ", ",
             dtype_name(dy.dtype()), " and ", dtype_name(scale.dtype()));
  if (x.rank() < 2) ctx.fail("X must have rank >= 2, got ", x.rank());
  if (dy.shape() != x.shape())
    ctx.fail("dY ", shape_to_string(dy.shape()), " must have the shape of X ",
             shape_to_string(x.shape()));
  BatchNormGradTensors t;
  t.n = x.dim(0);
  t.c = x.dim(1);
  if (scale.rank() != 1 || scale.numel() != t.c)
    ctx.fail("scale ", shape_to_string(scale.shape()), " must have shape [", t.c, "]");
  t.s = t.n * t.c != 0 ? x.numel() / (t.n * t.c) : 0;
  Shape per_channel(x.shape().size(), 1);
  per_channel[1] = t.c;
  t.dx = &ctx.allocate_output(0, x.shape(), DType::Float32);
  t.dscale_sum = &ctx.allocate_output(1, per_channel, DType::Float32);
  t.dbias_sum = &ctx.allocate_output(2, per_channel, DType::Float32);
  return t;
}

}  // namespace dprun
