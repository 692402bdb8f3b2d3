// Expand and Tile, both expressed as strided copies with zero strides over repeated dims.
#include "ops/cpu/broadcast.h"
#include "ops/cpu/data_movement.h"

namespace dprun {
namespace {

class ExpandKernel : public OpKernel {
 public:
  explicit ExpandKernel(const KernelInfo&) {}
  void compute(KernelContext& ctx) const override {
    const Tensor& x = ctx.input(0);
    const Tensor& shape_t = ctx.input(1);
    if (shape_t.rank() != 1) ctx.fail("shape input must be 1-D, got ", shape_t.describe());
    const std::vector<int64_t> target = read_int64_values(shape_t, ctx, "shape");
    for (int64_t d : target)
      if (d < 0) ctx.fail("shape ", shape_to_string(target), " has a negative dimension");
    Shape out_shape;
    try {
      out_shape = broadcast_shapes(x.shape(), target);
    } catch (const Error&) {
      ctx.fail("cannot expand ", shape_to_string(x.shape()), " to ", shape_to_string(target));
    }
    Tensor& y = ctx.allocate_output(0, out_shape, x.dtype());
    strided_copy(ctx.execution(), x.raw_data(), 0, out_shape,
                 broadcast_strides(x.shape(), out_shape.size()), y.raw_data(),
                 dtype_size(x.dtype()));
  }
};

// Tile-1 takes (input, tiles, axis): one repeat count for one axis. Tile-6+ takes one repeat
// count per dimension.
class TileKernel : public OpKernel {
 public:
  explicit TileKernel(const KernelInfo& info) : legacy_(info.opset < 6) {}
  void compute(KernelContext& ctx) const override {
    const Tensor& x = ctx.input(0);
    const int64_t r = x.rank();
    std::vector<int64_t> repeats;
    if (legacy_) {
      const int64_t tiles = read_int64_scalar(ctx.input(1), ctx, "tiles");
      const int64_t axis_raw = read_int64_scalar(ctx.input(2), ctx, "axis");
      const int64_t axis = axis_raw < 0 ? axis_raw + r : axis_raw;
      if (axis < 0 || axis >= r) ctx.fail("axis ", axis_raw, " is out of range for rank ", r);
      repeats.assign(static_cast<size_t>(r), 1);
      repeats[static_cast<size_t>(axis)] = tiles;
    } else {
      repeats = read_int64_values(ctx.input(1), ctx, "repeats");
    }
    if (static_cast<int64_t>(repeats.size()) != r)
      ctx.fail("repeats ", shape_to_string(repeats), " must have one entry per dimension of ",
               shape_to_string(x.shape()));
    const std::vector<int64_t> in_strides = contiguous_strides(x.shape());
    Shape out_shape, view_shape;
    std::vector<int64_t> view_strides;
    for (size_t d = 0; d < repeats.size(); ++d) {
      if (repeats[d] < 0) ctx.fail("repeats ", shape_to_string(repeats), " has a negative entry");
      out_shape.push_back(x.shape()[d] * repeats[d]);
      // Output dim d viewed as (repeat, input dim): the repeat index does not move the source.
      view_shape.push_back(repeats[d]);
      view_strides.push_back(0);
      view_shape.push_back(x.shape()[d]);
      view_strides.push_back(in_strides[d]);
    }
    Tensor& y = ctx.allocate_output(0, out_shape, x.dtype());
    strided_copy(ctx.execution(), x.raw_data(), 0, view_shape, view_strides, y.raw_data(),
                 dtype_size(x.dtype()));
  }

 private:
  bool legacy_;
};

DPRUN_REGISTER_KERNEL({.op_type = "Expand", .since = 8, .factory = make_kernel<ExpandKernel>});
DPRUN_REGISTER_KERNEL({.op_type = "Tile", .since = 1, .factory = make_kernel<TileKernel>});

}  // namespace
}  // namespace dprun
