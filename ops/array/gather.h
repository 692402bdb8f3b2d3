#pragma once
// Gather's shape logic, shared by the CPU and CUDA kernels: the output is data's dims before
// `axis`, then the indices' dims, then data's dims after `axis`.
#include "ops/common/data_movement.h"

namespace dprun {

/// Gather viewed as [outer, dim, inner] rows of data picked by the indices along `dim`.
struct GatherLayout {
  int64_t axis = 0;  // normalised
  int64_t dim = 0;   // data's size along axis: indices lie in [-dim, dim)
  int64_t outer = 1, inner = 1;
  Shape out_shape;
};

/// The layout of Gather(data, indices) with attribute `axis` (negative counts from the end);
/// fails naming the node for a scalar data or an axis out of range.
inline GatherLayout gather_layout(const Shape& data, const Shape& indices, int64_t axis_attr,
                                  const KernelContext& ctx) {
  const auto r = static_cast<int64_t>(data.size());
  if (r == 0) ctx.fail("data must have rank >= 1, got a scalar");
  GatherLayout g;
  g.axis = normalize_axis_attr(axis_attr, r, ctx);
  g.dim = data[static_cast<size_t>(g.axis)];
  g.out_shape.assign(data.begin(), data.begin() + g.axis);
  g.out_shape.insert(g.out_shape.end(), indices.begin(), indices.end());
  g.out_shape.insert(g.out_shape.end(), data.begin() + g.axis + 1, data.end());
  std::tie(g.outer, g.inner) = outer_inner(data, static_cast<size_t>(g.axis));
  return g;
}

}  // namespace dprun
