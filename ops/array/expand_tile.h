#pragma once
// Expand's and Tile's arguments, shared by the CPU and CUDA kernels. Both are copies of a
// strided view of the input whose zero strides repeat elements.
#include "ops/common/broadcast.h"
#include "ops/common/data_movement.h"

namespace dprun {

/// Expand: the input broadcast (numpy rules, in both directions) with the `shape` input.
class ExpandParams {
 public:
  explicit ExpandParams(const KernelInfo& info) : read_(info) {}

  /// The output as a view of the input `x`; fails naming the node when the shapes do not
  /// broadcast.
  ViewCopy layout(const KernelContext& ctx, const Shape& x) const {
    const Tensor& shape_t = read_.tensor(ctx, 1);
    if (shape_t.rank() != 1) ctx.fail("shape input must be 1-D, got ", shape_t.describe());
    const std::vector<int64_t> target = read_int64_values(shape_t, ctx, "shape");
    for (int64_t d : target)
      if (d < 0) ctx.fail("shape ", shape_to_string(target), " has a negative dimension");
    StridedView v;
    try {
      v.shape = broadcast_shapes(x, target);
    } catch (const Error&) {
      ctx.fail("cannot expand ", shape_to_string(x), " to ", shape_to_string(target));
    }
    v.strides = broadcast_strides(x, v.shape.size());
    return {v.shape, v};
  }

 private:
  IntInputReader read_;
};

// Tile-1 takes (input, tiles, axis): one repeat count for one axis. Tile-6+ takes one repeat
// count per dimension.
class TileParams {
 public:
  explicit TileParams(const KernelInfo& info) : legacy_(info.opset < 6), read_(info) {}

  /// The output, and the same elements as a view of the input of twice its rank.
  ViewCopy layout(const KernelContext& ctx, const Shape& x) const {
    const auto r = static_cast<int64_t>(x.size());
    std::vector<int64_t> repeats;
    if (legacy_) {
      const int64_t tiles = read_int64_scalar(read_.tensor(ctx, 1), ctx, "tiles");
      const int64_t axis_raw = read_int64_scalar(read_.tensor(ctx, 2), ctx, "axis");
      const int64_t axis = normalize_axis_attr(axis_raw, r, ctx);
      repeats.assign(static_cast<size_t>(r), 1);
      repeats[static_cast<size_t>(axis)] = tiles;
    } else {
      repeats = read_int64_values(read_.tensor(ctx, 1), ctx, "repeats");
    }
    if (static_cast<int64_t>(repeats.size()) != r)
      ctx.fail("repeats ", shape_to_string(repeats), " must have one entry per dimension of ",
               shape_to_string(x));
    const std::vector<int64_t> in_strides = contiguous_strides(x);
    ViewCopy t;
    for (size_t d = 0; d < repeats.size(); ++d) {
      if (repeats[d] < 0) ctx.fail("repeats ", shape_to_string(repeats), " has a negative entry");
      t.out_shape.push_back(x[d] * repeats[d]);
      // Output dim d viewed as (repeat, input dim): the repeat index does not move the source.
      t.view.shape.push_back(repeats[d]);
      t.view.strides.push_back(0);
      t.view.shape.push_back(x[d]);
      t.view.strides.push_back(in_strides[d]);
    }
    return t;
  }

 private:
  bool legacy_;
  IntInputReader read_;
};

}  // namespace dprun
