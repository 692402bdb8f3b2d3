#pragma once
// Walking a tensor along one axis: the shape seen as [outer, size, inner], so that element
// (o, d, i) sits at offset (o * size + d) * inner + i. Kernels that work on the values along an
// axis (ArgMax, CumSum, TopK) share this arithmetic, and the dtypes they take, instead of
// writing them each time.
#include <cstdint>
#include <utility>

#include "ops/common/reduce_common.h"

namespace dprun {

/// A shape split at one axis: the product of the dimensions before it (outer), the axis's own
/// size and the product of the dimensions after it (inner).
struct AxisSplit {
  int64_t outer = 1;
  int64_t size = 1;
  int64_t inner = 1;

  /// The number of (outer, inner) lanes: one per position of the other axes.
  int64_t lanes() const { return outer * inner; }
  /// Offset of element (o, d, 0): row d of block o, `inner` contiguous elements.
  int64_t row_offset(int64_t o, int64_t d) const { return (o * size + d) * inner; }
};

/// The split of `shape` at axis `a`, 0 <= a < rank.
inline AxisSplit split_at_axis(const Shape& shape, int64_t a) {
  const auto rank = static_cast<int64_t>(shape.size());
  return {dims_product(shape, 0, a), shape[static_cast<size_t>(a)],
          dims_product(shape, a + 1, rank)};
}

/// `axis` counted from the front: it may count from the end (-1 is the last axis). Fails naming
/// the node, the axis and the shape when it is out of range.
inline int64_t axis_index(const KernelContext& ctx, const Shape& shape, int64_t axis) {
  const auto rank = static_cast<int64_t>(shape.size());
  if (axis < -rank || axis >= rank)
    ctx.fail("axis ", axis, " is out of range for input shape ", shape_to_string(shape));
  return axis < 0 ? axis + rank : axis;
}

/// One (outer, inner) lane of a split: the elements along the axis at one position of the
/// other axes, `stride` (the split's inner size) apart.
struct AxisLane {
  int64_t index;   // lane number, o * inner + i: its offset in an output without the axis
  int64_t o;       // position among the outer dimensions
  int64_t i;       // position among the inner dimensions
  int64_t stride;  // distance between consecutive elements along the axis

  /// Offset of the lane's first element in a tensor of the same outer and inner sizes whose
  /// axis has `axis_size` elements (the input's axis, or an output's such as TopK's k).
  int64_t start(int64_t axis_size) const { return o * axis_size * stride + i; }
};

/// Calls f(lane) for the lanes numbered [begin, end) of `split`, in order (a parallel_for
/// chunk of split.lanes()).
template <class F>
void for_each_lane(const AxisSplit& split, int64_t begin, int64_t end, F&& f) {
  for (int64_t j = begin; j < end; ++j)
    f(AxisLane{j, j / split.inner, j % split.inner, split.inner});
}

/// Calls f(T{}) with T the C++ type of `t` for the types that ArgMax, CumSum and TopK take: the
/// floating types (16-bit ones included) and the integer types; fails naming the dtype for
/// the others (bool, string).
template <class F>
void visit_float_or_integer_dtype(const KernelContext& ctx, DType t, F&& f) {
  if (!is_floating(t) && !is_integral(t))
    ctx.fail("input dtype ", dtype_name(t), " is not supported");
  visit_dtype_among<float, double, Float16, BFloat16, int8_t, int16_t, int32_t, int64_t, uint8_t,
                    uint16_t, uint32_t, uint64_t>(t, std::forward<F>(f));
}

}  // namespace dprun
