#pragma once
// What the CPU and CUDA kernels of ScatterND, ScatterElements and Scatter share: the reduction
// attribute, the combination of an output element with an update (host and device), and
// ScatterElements' checks of its inputs, so both devices accept the same nodes and fail with
// the same messages.
#include <string>
#include <type_traits>

#include "engine/kernel.h"
#include "ops/common/data_movement.h"
#include "ops/math/host_device.h"

namespace dprun {

enum class ScatterReduction { None, Add, Mul, Max, Min };

inline ScatterReduction parse_scatter_reduction(const Node& node) {
  const std::string r = node.attr_string("reduction", "none");
  if (r == "none") return ScatterReduction::None;
  if (r == "add") return ScatterReduction::Add;
  if (r == "mul") return ScatterReduction::Mul;
  if (r == "max") return ScatterReduction::Max;
  if (r == "min") return ScatterReduction::Min;
  node.fail("unknown reduction '", r, "' (expected none, add, mul, max or min)");
}

/// Output element `a` combined with update `b` for a built-in arithmetic type or bool. Max and
/// min are std::max(a, b) and std::min(a, b) spelled out (device code has neither): the same
/// comparisons, so NaNs and signed zeros come out as on the host.
template <class T>
DPRUN_HOST_DEVICE inline T scatter_combine(T a, T b, ScatterReduction r) {
  if constexpr (std::is_same_v<T, bool>) {
    // Add/max act as logical or, mul/min as logical and.
    return (r == ScatterReduction::Add || r == ScatterReduction::Max) ? (a || b) : (a && b);
  } else {
    switch (r) {
      case ScatterReduction::Add:
        return static_cast<T>(a + b);
      case ScatterReduction::Mul:
        return static_cast<T>(a * b);
      case ScatterReduction::Max:
        return (a < b) ? b : a;
      case ScatterReduction::Min:
        return (b < a) ? b : a;
      default:
        return b;
    }
  }
}

/// ScatterElements' (and Scatter's) checks: data of rank >= 1, `axis_attr` in range (negatives
/// count from the end), updates of the indices' shape and the data's dtype, indices of the
/// data's rank and no larger outside the axis, int32 or int64 indices. Returns the axis.
inline int64_t check_scatter_elements(const KernelContext& ctx, const Tensor& data,
                                      const Tensor& indices, const Tensor& updates,
                                      int64_t axis_attr) {
  const int64_t r = data.rank();
  if (r == 0) ctx.fail("data must have rank >= 1, got a scalar");
  const int64_t axis = normalize_axis_attr(axis_attr, r, ctx);
  const Shape& ds = data.shape();
  const Shape& is = indices.shape();
  if (updates.shape() != is || updates.dtype() != data.dtype())
    ctx.fail("updates ", updates.describe(), " must match indices shape ", shape_to_string(is),
             " and data dtype ", dtype_name(data.dtype()));
  bool ok = indices.rank() == r;
  for (int64_t d = 0; ok && d < r; ++d)
    ok = d == axis || is[static_cast<size_t>(d)] <= ds[static_cast<size_t>(d)];
  if (!ok)
    ctx.fail("indices ", shape_to_string(is), " do not fit data ", shape_to_string(ds),
             " (same rank, no larger outside axis ", axis_attr, ")");
  // read_indices' message, for kernels that do not read the indices on the host.
  if (indices.dtype() != DType::Int32 && indices.dtype() != DType::Int64)
    ctx.fail("index must be int32 or int64, got ", indices.describe());
  return axis;
}

}  // namespace dprun
