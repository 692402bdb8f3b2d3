#pragma once
// What the CPU and CUDA LayerNormalization kernels share: the attributes, the rows an axis
// makes of X, the outputs (Y, and Mean and InvStdDev when wanted), and the check that Scale and
// B broadcast to the normalized shape.
#include <cstdint>

#include "ops/common/reduce_common.h"

namespace dprun {

struct LayerNormAttrs {
  int64_t axis;
  float epsilon;
  explicit LayerNormAttrs(const KernelInfo& info)
      : axis(info.node.attr_int("axis", -1)), epsilon(info.node.attr_float("epsilon", 1e-5f)) {}
};

/// One run's view of X as `rows` rows of `d` elements, and its allocated outputs.
struct LayerNormRun {
  int64_t rows = 0, d = 0;
  Shape norm_shape;  // X.shape[axis:]
  Tensor* y = nullptr;
  Tensor* mean = nullptr;     // null when not wanted
  Tensor* inv_std = nullptr;  // null when not wanted
};

/// Checks `axis` against X, then allocates Y and the wanted statistics outputs: shape
/// X.shape[:axis] + [1, ...], float64 for a float64 X and float32 otherwise.
inline LayerNormRun start_layer_norm(KernelContext& ctx, const Tensor& x, int64_t axis) {
  const int64_t rank = x.rank();
  if (axis < -rank || axis >= rank)
    ctx.fail("axis ", axis, " is out of range for input shape ", shape_to_string(x.shape()));
  const int64_t a = axis < 0 ? axis + rank : axis;
  LayerNormRun run;
  run.rows = dims_product(x.shape(), 0, a);
  run.d = dims_product(x.shape(), a, rank);
  run.norm_shape.assign(x.shape().begin() + a, x.shape().end());
  Shape stat_shape(x.shape().begin(), x.shape().begin() + a);
  stat_shape.resize(static_cast<size_t>(rank), 1);
  run.y = &ctx.allocate_output(0, x.shape(), x.dtype());
  const DType stat_dtype = x.dtype() == DType::Float64 ? DType::Float64 : DType::Float32;
  if (ctx.output_count() > 1 && ctx.output_wanted(1))
    run.mean = &ctx.allocate_output(1, stat_shape, stat_dtype);
  if (ctx.output_count() > 2 && ctx.output_wanted(2))
    run.inv_std = &ctx.allocate_output(2, stat_shape, stat_dtype);
  return run;
}

/// Fails unless a parameter of shape `param` broadcasts unidirectionally to `target`.
inline void check_param_broadcast(const KernelContext& ctx, const Shape& param, const Shape& target,
                                  const char* what) {
  bool ok = param.size() <= target.size();
  for (size_t i = 0; ok && i < param.size(); ++i) {
    const int64_t pd = param[param.size() - 1 - i], td = target[target.size() - 1 - i];
    ok = pd == td || pd == 1;
  }
  if (!ok)
    ctx.fail(what, " of shape ", shape_to_string(param),
             " does not broadcast to the normalized shape ", shape_to_string(target));
}

}  // namespace dprun
